package console

import (
	"strings"
	"testing"
)

func noEnv(string) (string, bool) { return "", false }

func TestConfigRefusesWhatCannotWork(t *testing.T) {
	cases := []struct {
		args []string
		want string // a substring of the error; empty for none
	}{
		{[]string{"--dev-sign-in"}, ""},
		{[]string{"--oidc-issuer", "https://idp.example.com/", "--oidc-client-id", "console"}, ""},
		{nil, "oidc-issuer"}, // nobody could sign in
		{[]string{"--oidc-issuer", "https://idp.example.com/"}, "oidc-client-id"},
		{[]string{"--dev-sign-in", "--oidc-token", "refresh_token"}, "oidc-token"},
		{[]string{"--dev-sign-in", "--oidc-issuer", "ftp://idp"}, "oidc-issuer"},
		{[]string{"--dev-sign-in", "--public-url", "https://console.example.com/?x=1"}, "public-url"},
		{[]string{"--dev-sign-in", "--http-listen", "7106"}, "http-listen"},
		{[]string{"--dev-sign-in", "--session-ttl", "10s"}, "session-ttl"},
	}
	for _, c := range cases {
		_, err := ParseConfig(c.args, noEnv)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: %v, want an error naming %s", c.args, err, c.want)
		}
	}
}

func TestDefaults(t *testing.T) {
	c, err := ParseConfig([]string{"--dev-sign-in"}, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPListen != "127.0.0.1:7106" || c.ListenAddr != DefaultListenAddr || c.MetricsAddr != DefaultMetricsAddr ||
		c.OIDCTokenField != TokenFieldAccess || c.baseURL("127.0.0.1:7106") != "http://127.0.0.1:7106" {
		t.Fatalf("defaults %+v", c)
	}
}
