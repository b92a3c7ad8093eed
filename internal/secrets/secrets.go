// Package secrets seals small secrets (agent credentials, CA keys) at rest
// with AES-256-GCM under a key kept in a private file, and reads the
// private files that hold keys and tokens, refusing one others can read
// (LoadKey, ReadToken, ReadPrivate).
package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cast-dev/cast/internal/fsutil"
)

// KeySize is the key length in bytes (AES-256).
const KeySize = 32

const (
	version1  = 1
	nonceSize = 12 // the standard GCM nonce; random nonces are safe well past our volume
)

// ErrOpen is the only error Open returns. It says nothing about why, so a
// caller cannot leak the plaintext or key by printing it.
var ErrOpen = errors.New("secrets: cannot open sealed value (wrong key, wrong name, or damaged)")

// Box seals and opens secrets under one key. It is safe for concurrent use.
type Box struct {
	aead cipher.AEAD
}

// NewBox returns a Box for key, which must be KeySize bytes.
func NewBox(key []byte) (*Box, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("secrets: key is %d bytes, want %d", len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	return &Box{aead: aead}, nil
}

// Seal encrypts plaintext and returns version || nonce || ciphertext+tag.
// aad is authenticated but not stored: callers pass the secret's name so a
// value copied under another name does not open.
func (b *Box) Seal(plaintext, aad []byte) ([]byte, error) {
	out := make([]byte, 1+nonceSize, 1+nonceSize+len(plaintext)+b.aead.Overhead())
	out[0] = version1
	nonce := out[1 : 1+nonceSize]
	if _, err := io.ReadFull(rand.Reader, nonce); err != nil {
		return nil, fmt.Errorf("secrets: nonce: %w", err)
	}
	return b.aead.Seal(out, nonce, plaintext, aad), nil
}

// Open reverses Seal. Any failure is ErrOpen.
func (b *Box) Open(sealed, aad []byte) ([]byte, error) {
	if len(sealed) < 1+nonceSize+b.aead.Overhead() || sealed[0] != version1 {
		return nil, ErrOpen
	}
	pt, err := b.aead.Open(nil, sealed[1:1+nonceSize], sealed[1+nonceSize:], aad)
	if err != nil {
		return nil, ErrOpen
	}
	return pt, nil
}

// LoadKey reads the key at path. The file must be private (no group or other
// permission bits) and hold exactly 2*KeySize hex characters, optionally
// followed by a newline. A missing file gives an error matching fs.ErrNotExist.
func LoadKey(path string) ([]byte, error) {
	f, err := openPrivate(path, "secrets: key file")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Read one byte past the longest valid file so oversize is detected
	// without reading an arbitrarily large file.
	buf := make([]byte, 2*KeySize+2)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("secrets: key file: %w", err)
	}
	buf = buf[:n]
	if n == 2*KeySize+1 && buf[n-1] == '\n' {
		buf = buf[:n-1]
	}
	return ParseKey(buf, "key file "+path)
}

// ParseKey decodes a key given as 2*KeySize hex characters (a key file's
// content, or CAST_SECRETS_KEY where a file cannot be private, as in a
// Kubernetes Secret). what names the source in errors, which never echo
// the content: hex.DecodeString's own error would quote the offending byte.
func ParseKey(text []byte, what string) ([]byte, error) {
	if len(text) != 2*KeySize {
		return nil, fmt.Errorf("secrets: %s is malformed: want %d hex characters and an optional newline", what, 2*KeySize)
	}
	key := make([]byte, KeySize)
	if _, err := hex.Decode(key, text); err != nil {
		return nil, fmt.Errorf("secrets: %s is malformed: not hex", what)
	}
	return key, nil
}

// LoadOrCreateKey loads the key at path, creating it (and its directory,
// mode 0700) with a fresh random key if the file does not exist.
//
// Two processes may create at once. Each writes its candidate to its own
// temp file and hard-links it into place; link never replaces an existing
// file, so exactly one candidate wins and everyone returns what is on disk.
// (A plain rename would let the second writer replace a key the first had
// already returned and maybe used.)
func LoadOrCreateKey(path string) ([]byte, error) {
	key, err := LoadKey(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("secrets: key dir: %w", err)
	}
	key = make([]byte, KeySize)
	if _, err := io.ReadFull(rand.Reader, key); err != nil {
		return nil, fmt.Errorf("secrets: generate key: %w", err)
	}
	suffix := make([]byte, 8)
	if _, err := io.ReadFull(rand.Reader, suffix); err != nil {
		return nil, fmt.Errorf("secrets: generate key: %w", err)
	}
	tmp := path + ".new-" + hex.EncodeToString(suffix)
	defer os.Remove(tmp)
	if err := fsutil.WriteFileAtomic(tmp, []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("secrets: write key file: %w", err)
	}
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("secrets: write key file: %w", err)
	}
	if err := fsutil.SyncDir(dir); err != nil {
		return nil, fmt.Errorf("secrets: write key file: %w", err)
	}
	return LoadKey(path)
}

// openPrivate opens a file holding a secret, refusing anything but a
// regular file that only its owner can read. The mode is checked on the
// open file, not the path, so it is the file that is read.
func openPrivate(path, what string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	st, err := f.Stat()
	switch {
	case err != nil:
		err = fmt.Errorf("%s: %w", what, err)
	case !st.Mode().IsRegular():
		err = fmt.Errorf("%s %s is not a regular file", what, path)
	case st.Mode().Perm()&0o077 != 0:
		err = fmt.Errorf("%s %s has mode %04o, readable by others; run: chmod 600 %s", what, path, st.Mode().Perm(), path)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
