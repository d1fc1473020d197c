package limithook

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// DefaultFailureDir is where share-plugin's DaemonSets have the hook leave its failure
// records (share-plugin --limit-hook-failure-dir): beside the hook's own folder under the
// host's /var/lib/gpushare, mounted into share-plugin at the same path.
const DefaultFailureDir = "/var/lib/gpushare/limit-hook-failures"

// Bounds of the failure records: a record is small, and the folder does not grow without
// end while no share-plugin reads it.
const (
	// MaxFailureRecordBytes is the most a record file holds; a reader takes a larger file
	// for garbage.
	MaxFailureRecordBytes = 8 << 10
	// maxFailureMessageBytes and maxFailureIDBytes bound the record's fields so that it
	// fits MaxFailureRecordBytes whatever the error text or container ID.
	maxFailureMessageBytes = 4 << 10
	maxFailureIDBytes      = 256
	// MaxFailureRecords is how many records the folder may hold; the hook writes none beyond.
	MaxFailureRecords = 1000
)

// FailureRecordSuffix ends a record's file name; the hook's temporary files start with a
// dot and end otherwise, so a reader never sees half a record.
const FailureRecordSuffix = ".json"

// FailureRecord is what the hook leaves in its failure folder when it fails, for
// share-plugin's gpushare_limit_hook_failures_total: the hook runs in the runtime on the
// host, where share-plugin cannot count its exits.
type FailureRecord struct {
	// Reason is one of Reasons.
	Reason string `json:"reason"`
	// Card is the UUID of the card the failure concerns; empty for none.
	Card string `json:"card,omitempty"`
	// ContainerID is the runtime's container ID; empty when the state was not read.
	ContainerID string `json:"containerID,omitempty"`
	// Time is when the hook failed.
	Time time.Time `json:"time"`
	// Message is the hook's error.
	Message string `json:"message"`
}

// WriteFailure writes r into dir as one file, atomically (a temporary file renamed), with its
// strings cut to fit MaxFailureRecordBytes. It writes nothing when dir already holds
// MaxFailureRecords entries. Returns the record's path. Errors: dir cannot be created, read
// or written, or is full.
func WriteFailure(dir string, r FailureRecord) (string, error) {
	r.Card = truncate(r.Card, maxFailureIDBytes)
	r.ContainerID = truncate(r.ContainerID, maxFailureIDBytes)
	r.Message = truncate(r.Message, maxFailureMessageBytes)
	b, err := encodeFailure(r)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating the failure records' folder: %w", err)
	}
	if err := roomFor(dir); err != nil {
		return "", err
	}
	var id [8]byte
	_, _ = rand.Read(id[:]) // never fails (crypto/rand)
	name := strconv.FormatInt(r.Time.UnixNano(), 10) + "-" + hex.EncodeToString(id[:]) + FailureRecordSuffix
	tmp, err := os.CreateTemp(dir, "."+name+".*.tmp")
	if err != nil {
		return "", fmt.Errorf("writing the failure record: %w", err)
	}
	defer os.Remove(tmp.Name()) // gone after the rename
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return "", fmt.Errorf("writing the failure record: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("writing the failure record: %w", err)
	}
	path := filepath.Join(dir, name)
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("writing the failure record: %w", err)
	}
	return path, nil
}

// encodeFailure is r as JSON in at most MaxFailureRecordBytes: JSON's escapes may make a
// string longer than its bytes, so the message is halved until it fits.
func encodeFailure(r FailureRecord) ([]byte, error) {
	for {
		b, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("encoding the failure record: %w", err)
		}
		if len(b) < MaxFailureRecordBytes || r.Message == "" {
			return b, nil
		}
		r.Message = truncate(r.Message, len(r.Message)/2-len("…"))
	}
}

// roomFor is nil when dir holds fewer than MaxFailureRecords entries.
func roomFor(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("reading the failure records' folder: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(MaxFailureRecords)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading the failure records' folder: %w", err)
	}
	if len(names) >= MaxFailureRecords {
		return fmt.Errorf("the failure records' folder %s holds %d entries already: is share-plugin reading it?", dir, len(names))
	}
	return nil
}

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
