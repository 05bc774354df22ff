package disksafe

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// BootRecordFile is the name of the boot record in its directory
// (DefaultBootDir unless told otherwise).
const BootRecordFile = "attestation.json"

// BootRecord is the HookOS agent's record of one boot's attestation, which
// the wipe-disk action reads: the file BootRecordFile, a JSON object
//
//	{"boot_id": "<this boot's /proc/sys/kernel/random/boot_id>",
//	 "attested": true,
//	 "install_code": "<the code fleetd answered; absent when none>",
//	 "time": "<RFC 3339 time of the verdict>"}
//
// written with mode 0600. The install code is a secret: String, GoString and
// LogValue leave it out. A BootRecord is a value.
type BootRecord struct {
	BootID   string    `json:"boot_id"`
	Attested bool      `json:"attested"`
	Code     string    `json:"install_code,omitempty"`
	Time     time.Time `json:"time,omitzero"`
}

// String describes r without its install code.
func (r BootRecord) String() string {
	code := "none"
	if r.Code != "" {
		code = "set"
	}
	return fmt.Sprintf("boot_id=%s attested=%t install_code=%s", r.BootID, r.Attested, code)
}

// GoString is String, so %#v does not print the install code either.
func (r BootRecord) GoString() string { return "disksafe.BootRecord{" + r.String() + "}" }

// LogValue describes r for slog without its install code.
func (r BootRecord) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("boot_id", r.BootID),
		slog.Bool("attested", r.Attested),
		slog.Bool("install_code", r.Code != ""),
	)
}

// maxRecord bounds the size of a record file.
const maxRecord = 64 << 10

// WriteBootRecord writes r as dir/BootRecordFile ("" dir: DefaultBootDir),
// replacing any earlier record at once (a temporary file renamed over it),
// so a reader sees the old record or the new one, never a part. It creates
// dir (mode 0700) if needed; the file's mode is 0600.
func WriteBootRecord(dir string, r BootRecord) error {
	if dir == "" {
		dir = DefaultBootDir
	}
	if r.BootID == "" {
		return errors.New("disksafe: a boot record needs the boot's ID")
	}
	return writeJSON(dir, BootRecordFile, r)
}

// ReadBootRecord reads dir/BootRecordFile ("" dir: DefaultBootDir). When
// there is none, errors.Is(err, fs.ErrNotExist). A record that is not one
// JSON object of the documented form is an error; its text never holds the
// file's contents.
func ReadBootRecord(dir string) (BootRecord, error) {
	if dir == "" {
		dir = DefaultBootDir
	}
	var r BootRecord
	if err := readJSON(filepath.Join(dir, BootRecordFile), &r); err != nil {
		return BootRecord{}, err
	}
	return r, nil
}

// BootID returns this boot's ID, /proc/sys/kernel/random/boot_id read
// through cfg's Root.
func BootID(cfg *Config) (string, error) {
	b, err := readFile(cfg.root(), "proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("disksafe: read this boot's ID: %w", err)
	}
	id := string(bytes.TrimSpace(b))
	if !validBootID(id) {
		return "", errors.New("disksafe: read this boot's ID: /proc/sys/kernel/random/boot_id holds no UUID")
	}
	return id, nil
}

// validBootID reports whether s has the form of a UUID as the kernel prints
// it: 8-4-4-4-12 lowercase hex digits.
func validBootID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
	}
	return true
}

// writeJSON writes v as dir/name atomically, mode 0600.
func writeJSON(dir, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("disksafe: encode %s: %w", name, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("disksafe: %w", err)
	}
	f, err := os.CreateTemp(dir, "."+name+".*")
	if err != nil {
		return fmt.Errorf("disksafe: %w", err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			os.Remove(tmp)
		}
	}()
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("disksafe: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("disksafe: write %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("disksafe: write %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("disksafe: write %s: %w", name, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("disksafe: %w", err)
	}
	ok = true
	return nil
}

// readJSON reads the JSON object in file into v, which must be a pointer to
// a struct; unknown fields and trailing data are errors.
func readJSON(file string, v any) error {
	b, err := readOSFile(file)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("disksafe: %s: %w", file, fs.ErrNotExist)
		}
		return fmt.Errorf("disksafe: read %s: %w", file, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("disksafe: %s is not a valid record (%s)", file, jsonProblem(err))
	}
	if dec.More() {
		return fmt.Errorf("disksafe: %s is not a valid record (data after the object)", file)
	}
	return nil
}

// jsonProblem describes a decoding error without quoting the input.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("malformed JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("field %q holds a JSON %s", te.Field, te.Value)
	default:
		// Unknown field errors quote the field's name, not its value.
		return oneLine(err.Error(), 200)
	}
}

// readOSFile reads a file of at most maxRecord bytes.
func readOSFile(file string) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxRecord+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxRecord {
		return nil, fmt.Errorf("larger than %d bytes", maxRecord)
	}
	return b, nil
}
