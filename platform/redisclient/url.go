package redisclient

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// URL schemes [New] accepts.
const (
	// SchemeRedis is one Redis server, plaintext.
	SchemeRedis = "redis"
	// SchemeRedisTLS is one Redis server over TLS.
	SchemeRedisTLS = "rediss"
	// SchemeSentinel is a primary found (and followed through failover)
	// through Redis Sentinel, plaintext.
	SchemeSentinel = "redis-sentinel"
	// SchemeSentinelTLS is [SchemeSentinel] with TLS to the sentinels and to
	// the data nodes.
	SchemeSentinelTLS = "rediss-sentinel"
)

// Query parameters of a Sentinel URL: the credentials of the sentinels
// themselves (the URL's user and password are the data nodes' ACL user).
const (
	paramSentinelUsername = "sentinel_username"
	paramSentinelPassword = "sentinel_password"
)

// Timeouts of every client: a service answers its callers within a few
// seconds, so a Redis that does not answer within these is unavailable.
const (
	dialTimeout  = 2 * time.Second
	readTimeout  = time.Second
	writeTimeout = time.Second
)

// AckTimeout bounds the WAIT after a write that must survive a failover
// ([Client.AckReplicas]); shorter than the read timeout, which bounds the
// whole pipeline it ends.
const AckTimeout = 300 * time.Millisecond

// ErrConfig is wrapped by every error about a Redis configuration (URL, TLS
// files). Its messages show the URL only through [Redact].
var ErrConfig = errors.New("redis configuration")

// Config says how to reach Redis.
type Config struct {
	// URL is one of
	//   redis://[user:password@]host:port[/db]
	//   rediss://[user:password@]host:port[/db]          (TLS)
	//   redis-sentinel://[user:password@]host:port[,host:port...]/master[/db]
	//   rediss-sentinel://...                            (TLS to sentinels and nodes)
	// user and password are the data nodes' ACL user (or only a password for
	// `requirepass`); a Sentinel URL's sentinel_username and
	// sentinel_password query parameters are the sentinels' own. redis and
	// rediss URLs take go-redis's query options (dial_timeout, ...).
	URL string
	// TLSCAFile is a PEM bundle of the CAs that sign the server
	// certificates; empty means the system roots. Only with a TLS scheme.
	TLSCAFile string
	// TLSCertFile and TLSKeyFile are the client certificate and key, for a
	// server that requires one (tls-auth-clients); both or neither. They are
	// read again at every new connection, so a rotated pair is used without
	// a restart.
	TLSCertFile, TLSKeyFile string
	// AckReplicas is how many replicas must acknowledge a write that must
	// survive a failover (the lease's single-use record) before it counts.
	// 0 is the default: 1 with Sentinel, none otherwise; negative: none.
	AckReplicas int
}

// Redact returns raw with its passwords replaced by `xxxxx`: the form a
// Redis URL may take in a log line or an error. A URL that does not parse
// is not shown at all.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable URL)"
	}
	if q := u.Query(); len(q) > 0 {
		for k := range q {
			if strings.Contains(strings.ToLower(k), "password") {
				q.Set(k, "xxxxx")
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// Sentinel reports whether the URL names a Sentinel deployment.
func (cfg Config) Sentinel() bool {
	s, _, _ := strings.Cut(cfg.URL, "://")
	return s == SchemeSentinel || s == SchemeSentinelTLS
}

func (cfg Config) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrConfig, Redact(cfg.URL), fmt.Sprintf(format, args...))
}

// Check reports what is wrong with cfg (URL form, TLS files) without
// connecting.
func (cfg Config) Check() error {
	_, err := cfg.options()
	return err
}

// options is what [New] builds a client from: exactly one of single and
// failover is set.
type options struct {
	single   *redis.Options
	failover *redis.FailoverOptions
	acks     int
}

func (cfg Config) options() (options, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		// url.Error repeats the whole URL, password included.
		return options{}, cfg.errorf("not a URL")
	}
	var o options
	var useTLS bool
	switch u.Scheme {
	case SchemeRedis, SchemeRedisTLS:
		useTLS = u.Scheme == SchemeRedisTLS
		if u.Port() == "" {
			return options{}, cfg.errorf("needs host:port")
		}
		single, err := redis.ParseURL(cfg.URL)
		if err != nil {
			return options{}, cfg.errorf("%s", strings.TrimPrefix(err.Error(), "redis: "))
		}
		o.single = single
	case SchemeSentinel, SchemeSentinelTLS:
		useTLS = u.Scheme == SchemeSentinelTLS
		f, err := cfg.failover(u)
		if err != nil {
			return options{}, err
		}
		o.failover = f
	default:
		return options{}, cfg.errorf("scheme must be %s, %s, %s or %s", SchemeRedis, SchemeRedisTLS, SchemeSentinel, SchemeSentinelTLS)
	}
	if !useTLS && (cfg.TLSCAFile != "" || cfg.TLSCertFile != "" || cfg.TLSKeyFile != "") {
		return options{}, cfg.errorf("TLS files given for a plaintext URL (use %s:// or %s://)", SchemeRedisTLS, SchemeSentinelTLS)
	}
	var tc *tls.Config
	if useTLS {
		if tc, err = cfg.tlsConfig(); err != nil {
			return options{}, err
		}
	}
	switch {
	case cfg.AckReplicas > 0:
		o.acks = cfg.AckReplicas
	case cfg.AckReplicas == 0 && o.failover != nil:
		o.acks = 1
	}
	if s := o.single; s != nil {
		s.TLSConfig = tc
		s.DialTimeout = orDefault(s.DialTimeout, dialTimeout)
		s.ReadTimeout = orDefault(s.ReadTimeout, readTimeout)
		s.WriteTimeout = orDefault(s.WriteTimeout, writeTimeout)
	} else {
		o.failover.TLSConfig = tc
	}
	return o, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// failover reads redis-sentinel://[user:pass@]h:p[,h:p...]/master[/db].
func (cfg Config) failover(u *url.URL) (*redis.FailoverOptions, error) {
	f := &redis.FailoverOptions{DialTimeout: dialTimeout, ReadTimeout: readTimeout, WriteTimeout: writeTimeout}
	for _, a := range strings.Split(u.Host, ",") {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return nil, cfg.errorf("sentinel %q is not host:port", a)
		}
		f.SentinelAddrs = append(f.SentinelAddrs, a)
	}
	if u.User != nil {
		f.Username = u.User.Username()
		f.Password, _ = u.User.Password()
	}
	path := strings.Split(strings.Trim(u.Path, "/"), "/")
	switch {
	case path[0] == "":
		return nil, cfg.errorf("needs the master name as the path (/mymaster)")
	case len(path) > 2:
		return nil, cfg.errorf("path must be /master or /master/db")
	}
	f.MasterName = path[0]
	if len(path) == 2 {
		db, err := strconv.Atoi(path[1])
		if err != nil || db < 0 {
			return nil, cfg.errorf("database %q is not a number", path[1])
		}
		f.DB = db
	}
	q := u.Query()
	for k := range q {
		if k != paramSentinelUsername && k != paramSentinelPassword {
			return nil, cfg.errorf("unknown query parameter %q (only %s, %s)", k, paramSentinelUsername, paramSentinelPassword)
		}
	}
	f.SentinelUsername, f.SentinelPassword = q.Get(paramSentinelUsername), q.Get(paramSentinelPassword)
	return f, nil
}

// tlsConfig verifies the server against TLSCAFile (or the system roots),
// under the name each connection dials (so each sentinel and each node is
// checked against its own host name), and presents the client pair.
func (cfg Config) tlsConfig() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.TLSCAFile != "" {
		pem, err := os.ReadFile(cfg.TLSCAFile)
		if err != nil {
			return nil, cfg.errorf("TLS CA file: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, cfg.errorf("TLS CA file %s holds no PEM certificate", cfg.TLSCAFile)
		}
		tc.RootCAs = pool
	}
	if (cfg.TLSCertFile == "") != (cfg.TLSKeyFile == "") {
		return nil, cfg.errorf("TLS client certificate and key go together")
	}
	if cfg.TLSCertFile != "" {
		load := func() (*tls.Certificate, error) {
			c, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
			if err != nil {
				return nil, cfg.errorf("TLS client certificate: %v", err)
			}
			return &c, nil
		}
		if _, err := load(); err != nil {
			return nil, err
		}
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return load() }
	}
	return tc, nil
}
