package secretenv

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// write writes a file of dir with the mode, whatever the umask.
func write(t *testing.T, dir, name, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLookup(t *testing.T) {
	dir, creds := t.TempDir(), t.TempDir()
	t.Chdir(dir)
	token := write(t, dir, "token", "s3cret\n", 0o600)
	write(t, dir, "crlf", "s3cret\r\n", 0o400)
	write(t, creds, "netbox-token", "from-credentials\n", 0o400)
	empty, blank := write(t, dir, "empty", "", 0o600), write(t, dir, "blank", " \n\n", 0o600)
	largest := write(t, dir, "largest", strings.Repeat("a", MaxSize-1)+"\n", 0o600)
	tooLarge := write(t, dir, "too-large", strings.Repeat("a", MaxSize+1), 0o600)
	if err := os.Symlink(token, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	type lookupCase struct {
		name      string
		env       map[string]string
		value     string
		from      string
		wantErr   error
		errSubstr []string
	}
	cases := []lookupCase{
		{name: "neither set", env: nil},
		{name: "the variable", env: map[string]string{"TOKEN": " s3cret \n"}, value: "s3cret", from: "TOKEN"},
		{name: "an empty variable is unset", env: map[string]string{"TOKEN": "", "TOKEN_FILE": token}, value: "s3cret", from: "TOKEN_FILE"},
		{name: "the file, its trailing newline trimmed", env: map[string]string{"TOKEN_FILE": token}, value: "s3cret", from: "TOKEN_FILE"},
		{name: "a CRLF trimmed", env: map[string]string{"TOKEN_FILE": filepath.Join(dir, "crlf")}, value: "s3cret", from: "TOKEN_FILE"},
		{name: "a symbolic link to the file", env: map[string]string{"TOKEN_FILE": filepath.Join(dir, "link")}, value: "s3cret", from: "TOKEN_FILE"},
		{name: "a relative name in CREDENTIALS_DIRECTORY", env: map[string]string{"TOKEN_FILE": "netbox-token", CredentialsDirectory: creds},
			value: "from-credentials", from: "TOKEN_FILE"},
		{name: "an absolute path ignores CREDENTIALS_DIRECTORY", env: map[string]string{"TOKEN_FILE": token, CredentialsDirectory: creds},
			value: "s3cret", from: "TOKEN_FILE"},
		{name: "without CREDENTIALS_DIRECTORY, a relative name is the working directory's", env: map[string]string{"TOKEN_FILE": "token"},
			value: "s3cret", from: "TOKEN_FILE"},
		{name: "at most MaxSize", env: map[string]string{"TOKEN_FILE": largest}, value: strings.Repeat("a", MaxSize-1), from: "TOKEN_FILE"},
		{name: "an empty file", env: map[string]string{"TOKEN_FILE": empty}, wantErr: ErrEmpty, errSubstr: []string{empty}},
		{name: "white space alone", env: map[string]string{"TOKEN_FILE": blank}, wantErr: ErrEmpty, errSubstr: []string{blank}},
		{name: "over MaxSize", env: map[string]string{"TOKEN_FILE": tooLarge}, wantErr: ErrTooLarge, errSubstr: []string{tooLarge}},
		{name: "both set", env: map[string]string{"TOKEN": "a", "TOKEN_FILE": token}, wantErr: ErrBothSet,
			errSubstr: []string{"TOKEN and TOKEN_FILE: a setting and its _FILE form are both set; unset one"}},
		{name: "a missing file", env: map[string]string{"TOKEN_FILE": "nope", CredentialsDirectory: creds}, wantErr: fs.ErrNotExist,
			errSubstr: []string{`TOKEN_FILE="nope": `, filepath.Join(creds, "nope"), "no such file"}},
		{name: "a directory", env: map[string]string{"TOKEN_FILE": creds}, wantErr: ErrNotRegular,
			errSubstr: []string{creds + " is not a regular file: a directory"}},
	}
	// A file its group or others may read or write is refused, with its
	// path and mode; the owner's own bits, and execute bits, do not matter.
	for mode, want := range map[os.FileMode]error{
		0o600: nil, 0o400: nil, 0o700: nil, 0o611: nil,
		0o644: ErrExposed, 0o640: ErrExposed, 0o604: ErrExposed, 0o620: ErrExposed, 0o602: ErrExposed, 0o444: ErrExposed,
	} {
		p := write(t, dir, mode.String(), "s3cret", mode)
		c := lookupCase{name: fmt.Sprintf("mode %04o", mode), env: map[string]string{"TOKEN_FILE": p}, value: "s3cret", from: "TOKEN_FILE"}
		if want != nil {
			c.value, c.from, c.wantErr = "", "", want
			c.errSubstr = []string{`TOKEN_FILE="` + p + `": `, fmt.Sprintf("%s has mode %04o: ", p, mode), "chmod 600 " + p}
		}
		cases = append(cases, c)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			value, from, err := Lookup(env(tc.env), "TOKEN")
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("Lookup: %v, want %v", err, tc.wantErr)
			}
			for _, s := range tc.errSubstr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("the error %q lacks %q", err, s)
				}
			}
			if value != tc.value || from != tc.from {
				t.Errorf("Lookup = %q from %q, want %q from %q", value, from, tc.value, tc.from)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error holds the secret: %q", err)
			}
		})
	}
}
