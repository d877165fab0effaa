package rpc

import (
	"bufio"
	"context"
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"time"

	"github.com/stripefs/stripefs/wire"
)

// Authentication. Every connection starts with a mutual proof that both
// ends hold the filesystem's key, before the server reads any request:
//
//  1. client → server: hello {version, fsname, role, group, lowest flavour
//     it accepts, nonce, X25519 share}
//  2. server → client: hello {version, boot, flavour chosen, nonce, X25519
//     share}, or a refusal that says why (another filesystem, an old
//     version, a flavour below the server's lowest)
//  3. privacy flavour: TLS 1.3 on the connection; the server's
//     certificate must carry the filesystem's public key
//  4. client → server: auth {HMAC-SHA256(role secret, transcript)}
//  5. server → client: auth {Ed25519 signature of the transcript by the
//     servers' key}, or a refusal
//
// The transcript is a SHA-256 of both hellos and, under TLS, the
// session's exported keying material (RFC 5705), which binds the proofs
// to this connection: proofs seen on one connection are worth nothing on
// another. The server's proof is a signature a client can check but not
// make, so a client key never lets its holder pose as a server. Under
// the integrity flavour, each direction's frames carry an HMAC-SHA256
// under a key derived (HKDF) from the X25519 exchange, the role secret
// and the transcript. Connections within one process (pipes) are
// authenticated the same way but carry no MAC or TLS: nothing outside
// the process sees them.

// Flavor is how much a connection protects its frames (Lustre's SSK
// flavours): auth authenticates both ends (skn), integrity also MACs
// every frame (ski), privacy runs the frames over TLS (skpi).
type Flavor uint8

const (
	FlavorAuth      Flavor = 1
	FlavorIntegrity Flavor = 2
	FlavorPrivacy   Flavor = 3
)

func (f Flavor) String() string {
	switch f {
	case FlavorAuth:
		return "auth"
	case FlavorIntegrity:
		return "integrity"
	case FlavorPrivacy:
		return "privacy"
	}
	return fmt.Sprintf("flavor(%d)", f)
}

// ParseFlavor reads a flavour's name.
func ParseFlavor(s string) (Flavor, error) {
	for f := FlavorAuth; f <= FlavorPrivacy; f++ {
		if s == f.String() {
			return f, nil
		}
	}
	return 0, fmt.Errorf("unknown flavour %q (auth, integrity or privacy)", s)
}

// DefaultFlavor is the lowest flavour clients and servers of this
// process accept unless told otherwise (--flavor).
var DefaultFlavor = FlavorAuth

// ErrAuth reports a peer that failed to authenticate, or refused us.
var ErrAuth = errors.New("authentication failed")

const (
	nonceSize     = 32
	handshakeMax  = 4096
	tlsExportName = "EXPORTER-stripefs-v1"
)

// session is an authenticated connection, ready for requests.
type session struct {
	conn   net.Conn // a *tls.Conn under the privacy flavour
	r      *frameReader
	w      *frameWriter
	peer   hello // the other end's hello
	role   Role
	group  string
	flavor Flavor
}

// isPipe tells an in-process connection (net.Pipe, under the inproc
// transport and the shortcut) from a socket.
func isPipe(c net.Conn) bool { return c.LocalAddr().Network() == "pipe" }

// transcript is what both proofs cover.
func transcript(clientHello, serverHello, binding []byte) []byte {
	h := sha256.New()
	h.Write([]byte(keyLabel + "handshake"))
	for _, b := range [][]byte{clientHello, serverHello, binding} {
		var n [4]byte
		binary.LittleEndian.PutUint32(n[:], uint32(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	return h.Sum(nil)
}

func clientProof(secret, th []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(keyLabel + "client proof"))
	m.Write(th)
	return m.Sum(nil)
}

func serverSigned(th []byte) []byte { return append([]byte(keyLabel+"server proof"), th...) }

// errKeyShare is a peer's X25519 share that is no key.
var errKeyShare = errors.New("bad key share")

// frameMACs are the integrity flavour's frame MACs of each direction,
// keyed from the X25519 exchange (our ephemeral key, the peer's share),
// the role secret and the transcript.
func frameMACs(eph *ecdh.PrivateKey, peerShare, secret, th []byte) (c2s, s2c *frameMAC, err error) {
	pub, err := ecdh.X25519().NewPublicKey(peerShare)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errKeyShare, err)
	}
	shared, err := eph.ECDH(pub)
	if err != nil {
		return nil, nil, err
	}
	ikm := append(shared, secret...)
	k1, err := hkdf.Key(sha256.New, ikm, th, keyLabel+"mac client to server", 32)
	if err != nil {
		return nil, nil, err
	}
	k2, err := hkdf.Key(sha256.New, ikm, th, keyLabel+"mac server to client", 32)
	if err != nil {
		return nil, nil, err
	}
	return newFrameMAC(k1), newFrameMAC(k2), nil
}

type authProof struct{ MAC []byte }

type authReply struct{ Sig []byte }

// readSmall reads one handshake frame of the given kind, its body at most
// handshakeMax bytes.
func readSmall(r *bufio.Reader, kind uint8) (Header, []byte, error) {
	hb := make([]byte, HeaderSize)
	if _, err := io.ReadFull(r, hb); err != nil {
		return Header{}, nil, err
	}
	h, err := DecodeHeader(hb)
	if err != nil {
		return h, nil, err
	}
	if h.Kind != kind || h.BulkLen != 0 || h.MsgLen > handshakeMax {
		return h, nil, fmt.Errorf("%w: kind %d (%d bytes) where the handshake's kind %d belongs", ErrBadFrame, h.Kind, h.MsgLen, kind)
	}
	body := make([]byte, h.MsgLen)
	if _, err := io.ReadFull(r, body); err != nil {
		return h, nil, err
	}
	return h, body, nil
}

func refusal(body []byte) string {
	var we wireError
	if err := wire.Unmarshal(body, &we); err != nil {
		return "(unreadable refusal)"
	}
	return we.Text
}

// clientHandshake authenticates nc, a new connection to c's server, as
// role with key.
func (c *Client) clientHandshake(ctx context.Context, nc net.Conn, key *Key, role Role) (*session, error) {
	if key.Role < role {
		return nil, fmt.Errorf("%w: %s is a %s key; this needs the %s key", ErrAuth, key.name(), key.Role, role)
	}
	group := ""
	if role == RoleClient {
		group = key.Group
	}
	secret := key.roleSecret(role, group)
	eph, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	flavor := c.Flavor
	if flavor == 0 {
		flavor = DefaultFlavor
	}
	mine := hello{Version: Version, Name: c.Name, UUID: c.ID(), FSName: key.FSName, Role: role, Group: group, Flavor: flavor,
		Nonce: randomBytes(nonceSize), DH: eph.PublicKey().Bytes()}
	cmsg := wire.Marshal(nil, &mine)
	w := &frameWriter{c: nc}
	if err := w.write(Header{Kind: KindHello}, cmsg, nil); err != nil {
		return nil, fmt.Errorf("hello: %w", err)
	}
	r := bufio.NewReaderSize(nc, 16<<10)
	h, smsg, err := readSmall(r, KindHello)
	if err != nil {
		return nil, fmt.Errorf("hello: %w", err)
	}
	if h.Status != 0 {
		return nil, fmt.Errorf("%w: server refused the hello: %s", ErrAuth, refusal(smsg))
	}
	var sh hello
	if err := wire.Unmarshal(smsg, &sh); err != nil {
		return nil, fmt.Errorf("hello: %w", err)
	}
	pipe := isPipe(nc)
	switch {
	case sh.Version != Version:
		return nil, fmt.Errorf("hello: server speaks protocol version %d, we speak %d", sh.Version, Version)
	case sh.Flavor < flavor && !pipe, sh.Flavor < FlavorAuth, sh.Flavor > FlavorPrivacy:
		return nil, fmt.Errorf("%w: server chose flavour %s, we accept %s or better", ErrAuth, sh.Flavor, flavor)
	case len(sh.Nonce) != nonceSize:
		return nil, fmt.Errorf("%w: server hello without a nonce", ErrAuth)
	}
	conn := nc
	var binding []byte
	if sh.Flavor == FlavorPrivacy && !pipe {
		if r.Buffered() > 0 {
			return nil, fmt.Errorf("%w: data before the TLS handshake", ErrBadFrame)
		}
		tc := tls.Client(nc, &tls.Config{
			MinVersion:         tls.VersionTLS13,
			InsecureSkipVerify: true, // the certificate is checked against the filesystem's key below, not a CA
			VerifyConnection: func(cs tls.ConnectionState) error {
				if len(cs.PeerCertificates) == 0 {
					return errors.New("no certificate")
				}
				pub, ok := cs.PeerCertificates[0].PublicKey.(ed25519.PublicKey)
				if !ok || !pub.Equal(key.Public) {
					return fmt.Errorf("the server's certificate is not of filesystem %q's key", key.FSName)
				}
				return nil
			},
		})
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, fmt.Errorf("%w: TLS: %v", ErrAuth, err)
		}
		st := tc.ConnectionState()
		if binding, err = st.ExportKeyingMaterial(tlsExportName, nil, 32); err != nil {
			return nil, err
		}
		conn = tc
		r = bufio.NewReaderSize(tc, 16<<10)
		w = &frameWriter{c: tc}
	}
	th := transcript(cmsg, smsg, binding)
	if err := w.write(Header{Kind: KindAuth}, wire.Marshal(nil, &authProof{MAC: clientProof(secret, th)}), nil); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	h, amsg, err := readSmall(r, KindAuth)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	if h.Status != 0 {
		return nil, fmt.Errorf("%w: server refused us: %s", ErrAuth, refusal(amsg))
	}
	var ar authReply
	if err := wire.Unmarshal(amsg, &ar); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	if !ed25519.Verify(key.Public, serverSigned(th), ar.Sig) {
		return nil, fmt.Errorf("%w: the server did not prove it holds filesystem %q's key: not one of its servers", ErrAuth, key.FSName)
	}
	s := &session{conn: conn, r: &frameReader{r: r, c: conn}, w: w, peer: sh, role: role, group: group, flavor: sh.Flavor}
	if sh.Flavor == FlavorIntegrity && !pipe {
		c2s, s2c, err := frameMACs(eph, sh.DH, secret, th)
		if err != nil {
			return nil, fmt.Errorf("%w: server's key share: %v", ErrAuth, err)
		}
		s.w.mac, s.r.mac = c2s, s2c
	}
	return s, nil
}

// DialRaw connects to addr and authenticates as role with key, and
// returns the connection with no client on it: for tests and diagnostics
// that write their own frames (auth flavour; other flavours' framing is
// the Client's own).
func DialRaw(ctx context.Context, addr string, key *Key, role Role) (net.Conn, error) {
	nc, err := DialContext(ctx, addr)
	if err != nil {
		return nil, err
	}
	c := &Client{Name: "raw", UUID: NewUUID(), Flavor: FlavorAuth}
	ss, err := c.clientHandshake(ctx, nc, key, role)
	if err != nil {
		nc.Close()
		return nil, err
	}
	if ss.flavor != FlavorAuth && !isPipe(nc) {
		nc.Close()
		return nil, fmt.Errorf("rpc: %s wants flavour %s; DialRaw speaks auth only", addr, ss.flavor)
	}
	return ss.conn, nil
}

// serverHandshake authenticates a connection the server accepted; on
// failure the peer has been told why (when it got that far).
func (s *Server) serverHandshake(nc net.Conn) (*session, error) {
	key, err := s.key()
	if err != nil {
		return nil, err
	}
	_ = nc.SetDeadline(time.Now().Add(s.Limits.HelloTimeout))
	defer nc.SetDeadline(time.Time{})
	w := &frameWriter{c: nc}
	refuse := func(kind uint8, format string, args ...any) error {
		text := fmt.Sprintf(format, args...)
		msg := wire.Marshal(nil, &wireError{Text: fmt.Sprintf("%s: %s", s.Name, text)})
		_ = w.write(Header{Kind: kind, Status: StatusError}, msg, nil)
		return fmt.Errorf("%w: %s", ErrAuth, text)
	}
	r := bufio.NewReaderSize(nc, 16<<10)
	_, cmsg, err := readSmall(r, KindHello)
	if err != nil {
		return nil, fmt.Errorf("hello: %w", err)
	}
	var hi hello
	if err := wire.Unmarshal(cmsg, &hi); err != nil {
		return nil, refuse(KindHello, "unreadable hello (a client of another protocol version?): %v", err)
	}
	pipe := isPipe(nc)
	flavor := max(hi.Flavor, s.MinFlavor)
	if pipe {
		flavor = max(hi.Flavor, FlavorAuth)
	}
	switch {
	case hi.Version != Version:
		return nil, refuse(KindHello, "client %q speaks protocol version %d, this server %d", hi.Name, hi.Version, Version)
	case hi.FSName != key.FSName:
		return nil, refuse(KindHello, "client %q has a key of filesystem %q; this server belongs to %q", hi.Name, hi.FSName, key.FSName)
	case hi.Role < RoleClient || hi.Role > RoleServer:
		return nil, refuse(KindHello, "client %q asks for no known role (%d)", hi.Name, hi.Role)
	case hi.Group != "" && hi.Role != RoleClient:
		return nil, refuse(KindHello, "client %q: only client keys have a group", hi.Name)
	case hi.Flavor > FlavorPrivacy:
		return nil, refuse(KindHello, "client %q asks for unknown flavour %d", hi.Name, hi.Flavor)
	case len(hi.Nonce) != nonceSize || len(hi.DH) != 32:
		return nil, refuse(KindHello, "client %q: hello without nonce or key share", hi.Name)
	}
	eph, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	sh := hello{Version: Version, Name: s.Name, Boot: s.Boot, Flavor: flavor, Nonce: randomBytes(nonceSize), DH: eph.PublicKey().Bytes()}
	smsg := wire.Marshal(nil, &sh)
	if err := w.write(Header{Kind: KindHello}, smsg, nil); err != nil {
		return nil, fmt.Errorf("hello: %w", err)
	}
	conn := nc
	var binding []byte
	if flavor == FlavorPrivacy && !pipe {
		if r.Buffered() > 0 {
			return nil, fmt.Errorf("%w: data before the TLS handshake", ErrBadFrame)
		}
		cert, err := s.certificate(key)
		if err != nil {
			return nil, err
		}
		tc := tls.Server(nc, &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}})
		if err := tc.Handshake(); err != nil {
			return nil, fmt.Errorf("%w: TLS with %q: %v", ErrAuth, hi.Name, err)
		}
		st := tc.ConnectionState()
		if binding, err = st.ExportKeyingMaterial(tlsExportName, nil, 32); err != nil {
			return nil, err
		}
		conn = tc
		r = bufio.NewReaderSize(tc, 16<<10)
		w = &frameWriter{c: tc}
	}
	th := transcript(cmsg, smsg, binding)
	_, amsg, err := readSmall(r, KindAuth)
	if err != nil {
		return nil, fmt.Errorf("auth of %q: %w", hi.Name, err)
	}
	var ap authProof
	if err := wire.Unmarshal(amsg, &ap); err != nil {
		return nil, refuse(KindAuth, "client %q: unreadable proof", hi.Name)
	}
	secret := key.roleSecret(hi.Role, hi.Group)
	if !hmac.Equal(ap.MAC, clientProof(secret, th)) {
		what := fmt.Sprintf("filesystem %q's %s key", key.FSName, hi.Role)
		if hi.Group != "" {
			what += fmt.Sprintf(" of group %q", hi.Group)
		}
		return nil, refuse(KindAuth, "client %q does not hold %s", hi.Name, what)
	}
	sig := ed25519.Sign(key.signer(), serverSigned(th))
	if err := w.write(Header{Kind: KindAuth}, wire.Marshal(nil, &authReply{Sig: sig}), nil); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	ss := &session{conn: conn, r: &frameReader{r: r, c: conn, timeout: s.Limits.FrameTimeout}, w: w, peer: hi,
		role: hi.Role, group: hi.Group, flavor: flavor}
	if flavor == FlavorIntegrity && !pipe {
		c2s, s2c, err := frameMACs(eph, hi.DH, secret, th)
		if errors.Is(err, errKeyShare) {
			return nil, refuse(KindAuth, "client %q: bad key share", hi.Name)
		}
		if err != nil {
			return nil, err
		}
		ss.r.mac, ss.w.mac = c2s, s2c
	}
	return ss, nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// certificate is the server's TLS certificate: self-signed by the
// servers' Ed25519 key, which is what clients check it against.
func (s *Server) certificate(key *Key) (tls.Certificate, error) {
	s.certOnce.Do(func() {
		priv := key.signer()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(1),
			Subject:      pkix.Name{CommonName: "stripefs " + key.FSName},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(100 * 365 * 24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, priv.Public(), priv)
		s.cert, s.certErr = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv}, err
	})
	return s.cert, s.certErr
}

// key is the key the server proves itself with: its own, or the process's.
func (s *Server) key() (*Key, error) {
	k := s.Key
	if k == nil {
		var err error
		if k, err = ProcessKey(); err != nil {
			return nil, err
		}
	}
	if k.Role != RoleServer {
		return nil, fmt.Errorf("%s: %s is a %s key; a server needs the filesystem's server key", s.Name, k.name(), k.Role)
	}
	return k, nil
}
