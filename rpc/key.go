package rpc

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
)

// Role is what the holder of a key may do (Lustre's SSK key types):
// clients call the file methods, admin tools also the management ones,
// and servers also each other's. A higher role may do what a lower one
// may.
type Role uint8

const (
	RoleNone   Role = 0
	RoleClient Role = 1
	RoleAdmin  Role = 2
	RoleServer Role = 3
)

func (r Role) String() string {
	switch r {
	case RoleClient:
		return "client"
	case RoleAdmin:
		return "admin"
	case RoleServer:
		return "server"
	}
	return fmt.Sprintf("role(%d)", r)
}

// ParseRole reads a role's name.
func ParseRole(s string) (Role, error) {
	for r := RoleClient; r <= RoleServer; r++ {
		if s == r.String() {
			return r, nil
		}
	}
	return RoleNone, fmt.Errorf("unknown role %q (client, admin or server)", s)
}

// Key is a filesystem key, as `stripefs keygen` writes it. A server key
// holds the filesystem's master secret, from which every role's secret
// and the servers' signing key are derived (HMAC-SHA256 with a label, as
// HKDF-Expand does), so a server can check any peer and prove itself to
// any. An admin or client key holds only its role's secret and the
// servers' public key: its holder can prove its role, and check that a
// server holds the master, but can neither act as a higher role nor
// pose as a server to another client.
type Key struct {
	FSName string
	Role   Role
	// Group names a client key's nodemap ("": none), authenticated with
	// it: a server derives the key's secret from the group's name.
	Group string
	// Secret is the master secret (server keys) or the role's secret.
	Secret []byte
	// Public is the servers' Ed25519 public key.
	Public ed25519.PublicKey
	// Path is the file the key came from, for messages.
	Path string
}

const keyLabel = "stripefs/v1 "

// NewMasterKey makes a new filesystem's server key.
func NewMasterKey(fsname string) (*Key, error) {
	if err := checkKeyName("filesystem name", fsname); err != nil {
		return nil, err
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	k := &Key{FSName: fsname, Role: RoleServer, Secret: secret}
	k.Public = k.signer().Public().(ed25519.PublicKey)
	return k, nil
}

func checkKeyName(what, s string) error {
	if s == "" && what == "filesystem name" {
		return errors.New("empty filesystem name")
	}
	if len(s) > 64 || strings.ContainsAny(s, " \t\r\n\x00") {
		return fmt.Errorf("%s %q: at most 64 characters, no spaces", what, s)
	}
	return nil
}

func (k *Key) label(parts ...string) []byte {
	m := hmac.New(sha256.New, k.Secret)
	m.Write([]byte(keyLabel + strings.Join(append([]string{k.FSName}, parts...), "\x00")))
	return m.Sum(nil)
}

// signer is the servers' signing key; only a server key has it.
func (k *Key) signer() ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(k.label("sign"))
}

// Derive returns the key of a lower role (and, for a client key, a
// nodemap group) that a server key grants.
func (k *Key) Derive(role Role, group string) (*Key, error) {
	if k.Role != RoleServer {
		return nil, fmt.Errorf("only a server key can make other keys; %s is a %s key", k.name(), k.Role)
	}
	if role < RoleClient || role > RoleServer {
		return nil, fmt.Errorf("no such role %d", role)
	}
	if group != "" && role != RoleClient {
		return nil, errors.New("only client keys belong to a nodemap group")
	}
	if err := checkKeyName("group", group); err != nil {
		return nil, err
	}
	if role == RoleServer {
		return k, nil
	}
	return &Key{FSName: k.FSName, Role: role, Group: group, Secret: k.roleSecret(role, group), Public: k.Public}, nil
}

// roleSecret is what a holder of role (and group) proves it knows.
func (k *Key) roleSecret(role Role, group string) []byte {
	if k.Role != RoleServer {
		return k.Secret
	}
	return k.label("role", role.String(), group)
}

func (k *Key) name() string {
	if k.Path != "" {
		return k.Path
	}
	return fmt.Sprintf("filesystem %q's key", k.FSName)
}

// Marshal is the key's file form: one "name value" pair a line, so that
// an administrator can see what a key is without a tool.
func (k *Key) Marshal() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# stripefs %s key of filesystem %s: keep it secret (mode 0600)\n", k.Role, k.FSName)
	fmt.Fprintf(&b, "fsname %s\nrole %s\n", k.FSName, k.Role)
	if k.Group != "" {
		fmt.Fprintf(&b, "group %s\n", k.Group)
	}
	fmt.Fprintf(&b, "secret %s\npublic %s\n", hex.EncodeToString(k.Secret), hex.EncodeToString(k.Public))
	return b.Bytes()
}

// ParseKey reads a key file's contents.
func ParseKey(data []byte) (*Key, error) {
	k := &Key{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' {
			continue
		}
		name, val, _ := strings.Cut(s, " ")
		val = strings.TrimSpace(val)
		var err error
		switch name {
		case "fsname":
			k.FSName = val
		case "role":
			k.Role, err = ParseRole(val)
		case "group":
			k.Group = val
		case "secret":
			k.Secret, err = hex.DecodeString(val)
		case "public":
			var p []byte
			p, err = hex.DecodeString(val)
			k.Public = p
		default:
			err = fmt.Errorf("unknown field %q", name)
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", line, err)
		}
	}
	switch {
	case k.FSName == "":
		return nil, errors.New("no fsname line")
	case k.Role == RoleNone:
		return nil, errors.New("no role line")
	case len(k.Secret) < 32:
		return nil, fmt.Errorf("secret of %d bytes, want 32", len(k.Secret))
	case len(k.Public) != ed25519.PublicKeySize:
		return nil, errors.New("no valid public line")
	}
	if k.Role == RoleServer && !bytes.Equal(k.signer().Public().(ed25519.PublicKey), k.Public) {
		return nil, errors.New("public key does not match the secret")
	}
	return k, nil
}

// LoadKey reads a key file. A key readable by others than its owner is
// refused, as ssh refuses such a private key.
func LoadKey(path string) (*Key, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("key %s: mode %#o lets others read it; chmod 600 it", path, st.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	k, err := ParseKey(data)
	if err != nil {
		return nil, fmt.Errorf("key %s: %w", path, err)
	}
	k.Path = path
	return k, nil
}

// WriteKey writes k to path, mode 0600, refusing to replace a file.
func WriteKey(path string, k *Key) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("key: %w", err)
	}
	if _, err := f.Write(k.Marshal()); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("key %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("key %s: %w", path, err)
	}
	return f.Close()
}

// The process's key: what clients and servers of this process prove
// themselves with unless they are given another. A program sets it from
// --key at start (SetKey); a process that never does (a test that runs
// its servers and clients together) gets a key of its own at first use,
// so that nothing in it ever talks without authentication.
var processKey struct {
	sync.Mutex
	key *Key
	err error // SetKeyError: why there is no key
}

// SetKey makes k the process's key.
func SetKey(k *Key) {
	processKey.Lock()
	processKey.key, processKey.err = k, nil
	processKey.Unlock()
}

// SetKeyError says why the process has no key: every connection it
// tries, and every server it starts, fails with err.
func SetKeyError(err error) {
	processKey.Lock()
	processKey.key, processKey.err = nil, err
	processKey.Unlock()
}

// ProcessKey returns the process's key.
func ProcessKey() (*Key, error) {
	processKey.Lock()
	defer processKey.Unlock()
	if processKey.key == nil && processKey.err == nil {
		k, err := NewMasterKey("stripefs")
		if err != nil {
			return nil, err
		}
		processKey.key = k
	}
	return processKey.key, processKey.err
}
