package receipts

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
)

// copySQL is the COPY a batch is stored with, the columns in the order
// [appendRow] writes them.
var copySQL = "COPY receipts (" + strings.Join(columns, ", ") + ") FROM STDIN (FORMAT binary)"

// copyHeader opens Postgres's binary COPY format: the signature, no flags,
// no header extension.
var copyHeader = []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")

// copyTrailer is the field count -1 that ends the data.
var copyTrailer = []byte{0xff, 0xff}

// postgresEpoch is where timestamptz counts its microseconds from,
// 2000-01-01T00:00:00Z, in Unix seconds.
const postgresEpoch = 946_684_800

// appendRow appends r as one tuple of the binary COPY format, in the order
// of columns. Done by hand into the writer's reused buffer: pgx's CopyFrom
// encodes each value through an interface and grows a fresh buffer per
// batch: about 2.4 KB per receipt, an eighth of what a cached Check
// allocated (and the collector's work with it).
func appendRow(b []byte, r *admissionv1.Receipt) ([]byte, error) {
	id, err := uuid.Parse(r.GetReceiptId())
	if err != nil {
		return b, fmt.Errorf("receipts: receipt id: %w", err)
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(columns)))
	b = appendField(b, id[:])
	for _, s := range [...]string{r.GetTenantId(), r.GetSubject(), r.GetToolId(), r.GetServerId(), r.GetAudienceClass()} {
		b = appendText(b, s)
	}
	b = appendInt8(b, r.GetGeneration())
	b = appendText(b, r.GetDescriptorDigest())
	b = appendInt8(b, r.GetPolicyEpoch())
	b = appendText(b, r.GetArgumentDigest())
	b = appendInt2(b, int16(r.GetMode()))
	b = appendText(b, r.GetRunId())
	b = appendInt2(b, int16(r.GetDecision()))
	b = appendInt2(b, int16(r.GetReason()))
	b = appendInt2(b, int16(r.GetEffectClass()))
	at := r.GetDecidedAt()
	if at == nil {
		return b, errors.New("receipts: receipt without a decision time")
	}
	b = appendTimestamp(b, at.GetSeconds(), at.GetNanos())
	b = appendText(b, r.GetReplica())
	b = appendText(b, r.GetConfirmer())
	if c := r.GetConfirmedAt(); c != nil {
		b = appendTimestamp(b, c.GetSeconds(), c.GetNanos())
	} else {
		b = binary.BigEndian.AppendUint32(b, 0xffff_ffff) // NULL: length -1
	}
	b = appendText(b, r.GetShownDigest())
	b = appendText(b, r.GetAdmittingGrant())
	return b, nil
}

// appendTimestamp appends a timestamptz: microseconds since 2000-01-01.
func appendTimestamp(b []byte, seconds int64, nanos int32) []byte {
	return appendInt8(b, (seconds-postgresEpoch)*1_000_000+int64(nanos/1000))
}

func appendField(b, v []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}

func appendText(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

func appendInt8(b []byte, v int64) []byte {
	b = binary.BigEndian.AppendUint32(b, 8)
	return binary.BigEndian.AppendUint64(b, uint64(v))
}

func appendInt2(b []byte, v int16) []byte {
	b = binary.BigEndian.AppendUint32(b, 2)
	return binary.BigEndian.AppendUint16(b, uint16(v))
}
