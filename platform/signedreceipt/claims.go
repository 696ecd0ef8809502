package signedreceipt

import "strconv"

// decodeClaims decodes the claims of a receipt written as [Sign] writes
// them — one object without whitespace, each member a claim named exactly
// as in [claimNames] and at most once, each string printable ASCII without
// an escape, each number an integer in its field's range without a sign
// on zero, a fraction or an exponent — into exactly what json.Unmarshal
// would make of them (for such input [strictMembers] holds as well); ok is
// false for any other input, which json.Unmarshal and [strictMembers] then
// decide. It reads the payload once, where they read it three times.
func decodeClaims(b []byte) (w wireClaims, ok bool) {
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return w, false
	}
	var seen [len(claimNames)]bool
	for i := 1; ; {
		name, next, ok := plainString(b, i)
		if !ok || next >= len(b) || b[next] != ':' {
			return w, false
		}
		c := claimIndex(name)
		if c < 0 || seen[c] {
			return w, false
		}
		seen[c] = true
		i = next + 1
		switch c {
		case 3, 4, 12, 13: // decision, reason, mode, effect
			v, n, ok := plainInt(b, i, 32)
			if !ok {
				return w, false
			}
			switch c {
			case 3:
				w.Decision = int32(v)
			case 4:
				w.Reason = int32(v)
			case 12:
				w.Mode = int32(v)
			default:
				w.Effect = int32(v)
			}
			i = n
		case 8, 10, 18, 19, 20: // gen, epoch, iat_ms, iat, exp
			v, n, ok := plainInt(b, i, 64)
			if !ok {
				return w, false
			}
			switch c {
			case 8:
				w.Generation = v
			case 10:
				w.PolicyEpoch = v
			case 18:
				w.DecidedAt = v
			case 19:
				w.IssuedAt = v
			default:
				w.Expires = v
			}
			i = n
		default:
			s, n, ok := plainString(b, i)
			if !ok {
				return w, false
			}
			*w.stringClaim(c) = string(s)
			i = n
		}
		switch {
		case i < len(b)-1 && b[i] == ',':
			i++
		case i == len(b)-1: // the closing brace
			return w, true
		default:
			return w, false
		}
	}
}

// stringClaim is the field of the string claim claimNames[c].
func (w *wireClaims) stringClaim(c int) *string {
	switch c {
	case 0:
		return &w.ID
	case 1:
		return &w.Subject
	case 2:
		return &w.Tenant
	case 5:
		return &w.Tool
	case 6:
		return &w.Server
	case 7:
		return &w.AudienceClass
	case 9:
		return &w.DescriptorDigest
	case 11:
		return &w.ArgumentDigest
	case 14:
		return &w.RunID
	case 15:
		return &w.Replica
	case 16:
		return &w.Confirmer
	default: // 17
		return &w.ShownDigest
	}
}

// claimIndex is the index of name in [claimNames], -1 for none.
func claimIndex(name []byte) int {
	for i, c := range claimNames {
		if string(name) == c {
			return i
		}
	}
	return -1
}

// plainString returns the contents of the JSON string at b[i] and the
// index past it when it holds only printable ASCII other than a quote or a
// backslash (its bytes are then its value); ok is false otherwise.
func plainString(b []byte, i int) (s []byte, next int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, true
		case c < 0x20 || c > 0x7e || c == '\\':
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// plainInt returns the integer at b[i] and the index past it when it is
// written as JSON writes an integer (no plus sign, no leading zero, no
// "-0", no fraction or exponent) and fits in bits; ok is false otherwise.
func plainInt(b []byte, i, bits int) (v int64, next int, ok bool) {
	j := i
	if j < len(b) && b[j] == '-' {
		j++
	}
	start := j
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	switch {
	case j == start, b[start] == '0' && (j > start+1 || start > i):
		return 0, 0, false
	case j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E'):
		return 0, 0, false
	}
	v, err := strconv.ParseInt(string(b[i:j]), 10, bits)
	if err != nil {
		return 0, 0, false
	}
	return v, j, true
}
