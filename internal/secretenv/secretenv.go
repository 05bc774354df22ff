// Package secretenv reads a program's secret settings from its
// environment: each from its variable, NAME, or from the file its _FILE
// form, NAME_FILE, names, as systemd credentials (LoadCredential=) and
// mounted secrets deliver them. A secret in a file stays out of the
// process environment, which /proc/PID/environ, crash reports and child
// processes can show.
//
// # Rules
//
//   - Precedence is refused, not guessed: NAME and NAME_FILE both set is
//     ErrBothSet. An empty variable counts as unset.
//   - A relative NAME_FILE is resolved against $CREDENTIALS_DIRECTORY when
//     that is set (systemd sets it to the directory LoadCredential= fills,
//     so NETBOX_TOKEN_FILE=netbox-token names the credential netbox-token),
//     and against the working directory otherwise.
//   - The file must be a regular file (symbolic links are followed) that
//     neither its group nor others may read or write: mode 0600 or 0400,
//     as systemd's credentials are. Anything more open is ErrExposed, with
//     the file and its mode in the message; a directory, device or pipe is
//     ErrNotRegular.
//   - Surrounding white space, such as the newline echo writes, is
//     dropped, as it is from a variable. A file that holds nothing else is
//     ErrEmpty; one over MaxSize bytes is ErrTooLarge.
//   - A file that cannot be opened is reported with its *fs.PathError,
//     which names the file (errors.Is(err, fs.ErrNotExist) finds a missing
//     one).
//
// Every error starts with the variable and the value it was given, e.g.
// NETBOX_TOKEN_FILE="netbox-token": ..., and never holds the secret.
//
// # Use
//
//	token, from, err := secretenv.Lookup(os.Getenv, "NETBOX_TOKEN")
//	if err != nil { ... }       // say err, exit
//	if token == "" { ... }      // neither NETBOX_TOKEN nor NETBOX_TOKEN_FILE is set
//	_ = from                    // "NETBOX_TOKEN" or "NETBOX_TOKEN_FILE", to name it in messages
package secretenv

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// FileSuffix makes a variable's _FILE form.
const FileSuffix = "_FILE"

// CredentialsDirectory is the variable systemd sets to the directory of
// the service's credentials.
const CredentialsDirectory = "CREDENTIALS_DIRECTORY"

// MaxSize is the most bytes a secret file may hold.
const MaxSize = 64 << 10

// Errors Lookup wraps; errors.Is finds them.
var (
	ErrBothSet    = errors.New("a setting and its _FILE form are both set")
	ErrExposed    = errors.New("its group or others may read or write it, and a secret file must be its owner's alone")
	ErrNotRegular = errors.New("not a regular file")
	ErrTooLarge   = fmt.Errorf("larger than %d KiB", MaxSize>>10)
	ErrEmpty      = errors.New("empty")
)

// Lookup returns the secret name: the value of the variable name, or else
// the contents of the file that name+FileSuffix names, with surrounding
// white space dropped, and the variable it came from. Neither set returns
// "", "" and no error. getenv reads the environment (os.Getenv).
func Lookup(getenv func(string) string, name string) (value, from string, err error) {
	fileVar := name + FileSuffix
	v, file := strings.TrimSpace(getenv(name)), strings.TrimSpace(getenv(fileVar))
	switch {
	case v != "" && file != "":
		return "", "", fmt.Errorf("%s and %s: %w; unset one", name, fileVar, ErrBothSet)
	case v != "":
		return v, name, nil
	case file == "":
		return "", "", nil
	}
	path := file
	if dir := getenv(CredentialsDirectory); dir != "" && !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	value, err = read(path)
	if err != nil {
		return "", "", fmt.Errorf("%s=%q: %w", fileVar, file, err)
	}
	return value, fileVar, nil
}

// read returns the secret in the file at path.
func read(path string) (string, error) {
	// Stat before opening, so that a pipe or device is never opened (a
	// pipe would block).
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if err := check(path, fi); err != nil {
		return "", err
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	// The file opened is the one checked: not one swapped in since.
	if ofi, err := f.Stat(); err != nil {
		return "", err
	} else if !os.SameFile(fi, ofi) {
		return "", fmt.Errorf("%s changed while it was read; try again", path)
	} else if err := check(path, ofi); err != nil {
		return "", err
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return "", err
	}
	if len(b) > MaxSize {
		return "", fmt.Errorf("%s is %w", path, ErrTooLarge)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s is %w", path, ErrEmpty)
	}
	return s, nil
}

// check refuses a file that is not regular, or that others may read or
// write.
func check(path string, fi os.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is %w: %s", path, ErrNotRegular, kind(fi.Mode()))
	}
	if perm := fi.Mode().Perm(); perm&0o066 != 0 {
		return fmt.Errorf("%s has mode %04o: %w; chmod 600 %s, or load it with systemd's LoadCredential=", path, perm, ErrExposed, path)
	}
	return nil
}

// kind names a file's type, for a file that is not regular.
func kind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return "mode " + m.String()
}
