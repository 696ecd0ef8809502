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
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return 0, 0, err
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		return 0, 0, err
	}
	var (
		types   []int64 // the type's string index of each value
		samples []profileSample
		strs    []string
	)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, 0, protowire.ParseError(n)
		}
		b = b[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return 0, 0, protowire.ParseError(n)
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return 0, 0, protowire.ParseError(n)
		}
		b = b[n:]
		switch num {
		case 1: // sample_type: ValueType{type = 1}
			vt, err := fields(v)
			if err != nil {
				return 0, 0, err
			}
			types = append(types, vt[1].num)
		case 2: // sample: Sample{value = 2 (packed), label = 3}
			s, err := parseSample(v)
			if err != nil {
				return 0, 0, err
			}
			samples = append(samples, s)
		case 6: // string_table
			strs = append(strs, string(v))
		}
	}
	cpu := -1
	for i, t := range types {
		if t >= 0 && int(t) < len(strs) && strs[t] == "cpu" {
			cpu = i
		}
	}
	if cpu < 0 {
		return 0, 0, fmt.Errorf("the profile has no cpu sample type")
	}
	for _, s := range samples {
		if cpu >= len(s.values) {
			continue
		}
		total += s.values[cpu]
		for _, l := range s.labels {
			if int(l[0]) < len(strs) && int(l[1]) < len(strs) && strs[l[0]] == benchLabel && strs[l[1]] == value {
				labelled += s.values[cpu]
			}
		}
	}
	return labelled, total, nil
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
