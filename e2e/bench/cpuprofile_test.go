package bench

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime/pprof"

	"google.golang.org/protobuf/encoding/protowire"
)

// benchLabel is the pprof label key under which a benchmark marks the
// work of one component running in the test process (goroutines started
// under it inherit it).
const benchLabel = "toolcrib_bench"

// labelHandler runs h under the pprof label benchLabel=value.
func labelHandler(value string, h http.Handler) http.Handler {
	labels := pprof.Labels(benchLabel, value)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pprof.Do(r.Context(), labels, func(ctx context.Context) { h.ServeHTTP(w, r.WithContext(ctx)) })
	})
}

// labelledCPU reads a CPU profile (gzip'd profile.proto, as
// runtime/pprof writes it) and returns the CPU time of the samples whose
// label benchLabel is value, and of all samples, in nanoseconds. It reads
// only what it needs: the sample types, the samples' values and string
// labels, and the string table.
func labelledCPU(raw []byte, value string) (labelled, total int64, err error) {
	p, err := readProfile(raw)
	if err != nil {
		return 0, 0, err
	}
	for _, s := range p.samples {
		ns := p.cpuOf(s)
		total += ns
		if p.label(s, benchLabel) == value {
			labelled += ns
		}
	}
	return labelled, total, nil
}

// labelledCPUBy is the CPU time (ns) of the samples whose label benchLabel
// is value, split by their value of label key ("" for samples without
// it).
func labelledCPUBy(raw []byte, value, key string) (map[string]int64, error) {
	p, err := readProfile(raw)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, s := range p.samples {
		if p.label(s, benchLabel) == value {
			out[p.label(s, key)] += p.cpuOf(s)
		}
	}
	return out, nil
}

// cpuProfile is what readProfile keeps of a CPU profile.
type cpuProfile struct {
	samples []profileSample
	strs    []string
	cpu     int // index of the cpu value in a sample
}

func (p cpuProfile) cpuOf(s profileSample) int64 {
	if p.cpu >= len(s.values) {
		return 0
	}
	return s.values[p.cpu]
}

// label is s's value of label key, "" when it has none.
func (p cpuProfile) label(s profileSample, key string) string {
	for _, l := range s.labels {
		if int(l[0]) < len(p.strs) && int(l[1]) < len(p.strs) && p.strs[l[0]] == key {
			return p.strs[l[1]]
		}
	}
	return ""
}

func readProfile(raw []byte) (cpuProfile, error) {
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return cpuProfile{}, err
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		return cpuProfile{}, err
	}
	var (
		types []int64 // the type's string index of each value
		p     cpuProfile
	)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return cpuProfile{}, protowire.ParseError(n)
		}
		b = b[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return cpuProfile{}, protowire.ParseError(n)
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return cpuProfile{}, protowire.ParseError(n)
		}
		b = b[n:]
		switch num {
		case 1: // sample_type: ValueType{type = 1}
			vt, err := fields(v)
			if err != nil {
				return cpuProfile{}, err
			}
			types = append(types, vt[1].num)
		case 2: // sample: Sample{value = 2 (packed), label = 3}
			s, err := parseSample(v)
			if err != nil {
				return cpuProfile{}, err
			}
			p.samples = append(p.samples, s)
		case 6: // string_table
			p.strs = append(p.strs, string(v))
		}
	}
	p.cpu = -1
	for i, t := range types {
		if t >= 0 && int(t) < len(p.strs) && p.strs[t] == "cpu" {
			p.cpu = i
		}
	}
	if p.cpu < 0 {
		return cpuProfile{}, fmt.Errorf("the profile has no cpu sample type")
	}
	return p, nil
}

// field is a varint field's value (the only kind ValueType and Label hold
// that this reads).
type field struct{ num int64 }

// fields reads a message of varint fields by number.
func fields(b []byte) (map[protowire.Number]field, error) {
	out := map[protowire.Number]field{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		if typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return nil, protowire.ParseError(n)
			}
			out[num] = field{num: int64(v)}
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
	}
	return out, nil
}

// profileSample is a sample's values and string labels (key and value as
// indexes into the string table).
type profileSample struct {
	values []int64
	labels [][2]int64
}

func parseSample(b []byte) (s profileSample, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return s, protowire.ParseError(n)
		}
		b = b[n:]
		switch {
		case num == 2 && typ == protowire.BytesType: // packed values
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return s, protowire.ParseError(n)
			}
			b = b[n:]
			for len(v) > 0 {
				x, m := protowire.ConsumeVarint(v)
				if m < 0 {
					return s, protowire.ParseError(m)
				}
				s.values = append(s.values, int64(x))
				v = v[m:]
			}
		case num == 2 && typ == protowire.VarintType:
			x, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return s, protowire.ParseError(m)
			}
			s.values = append(s.values, int64(x))
			b = b[m:]
		case num == 3 && typ == protowire.BytesType: // label
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return s, protowire.ParseError(m)
			}
			b = b[m:]
			f, err := fields(v)
			if err != nil {
				return s, err
			}
			s.labels = append(s.labels, [2]int64{f[1].num, f[2].num})
		default:
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return s, protowire.ParseError(m)
			}
			b = b[m:]
		}
	}
	return s, nil
}
