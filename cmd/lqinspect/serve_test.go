package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// serveToken is an access token long enough for serve.
const serveToken = "tok-tok-tok-tok-tok"

func TestServeRefusesAReachableAddressWithoutAToken(t *testing.T) {
	fx := newFixture(t)
	for _, addr := range []string{"0.0.0.0:0", ":0"} {
		r := lq(t, "", "serve", fx.path, "--addr", addr)
		require.Equal(t, exitUsage, r.code, addr)
		require.Contains(t, r.stderr, "reachable from other machines", addr)
	}
	r := lq(t, "", "serve", "--addr", "127.0.0.1:0")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "missing FILE")
}

// A short token is refused at start, before anything listens.
func TestServeRefusesAShortToken(t *testing.T) {
	fx := newFixture(t)
	r := lq(t, "", "serve", fx.path, "--addr", "127.0.0.1:0", "--token", "s3cret")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "the access token is too short: it is 6 bytes long, and must be at least 16")
	r = lqApp(t, func(a *app) {
		a.getenv = func(k string) string {
			if k == envToken {
				return "short"
			}
			return ""
		}
	}, "", "serve", fx.path, "--addr", "127.0.0.1:0")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "$"+envToken)
}

func TestServeTLSFlagsGoTogether(t *testing.T) {
	fx := newFixture(t)
	r := lq(t, "", "serve", fx.path, "--addr", "127.0.0.1:0", "--tls-cert", "cert.pem")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "--tls-cert and --tls-key go together")
	r = lq(t, "", "serve", fx.path, "--addr", "127.0.0.1:0", "--tls-cert", filepath.Join(t.TempDir(), "none.pem"), "--tls-key", "none.pem")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "--tls-cert")
}

// lockedBuffer is a bytes.Buffer safe for the server goroutine and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// serving is an lqinspect serve running for a test.
type serving struct {
	base   string // "http://127.0.0.1:PORT" (or https)
	stderr *lockedBuffer
	stop   func() int // interrupts it and returns its exit code
}

// startServe runs lqinspect serve with args (after "serve FILE") and the
// environment's token token ("" for none), and waits until it says where
// it listens.
func startServe(t *testing.T, path, token string, args ...string) *serving {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &serving{stderr: &lockedBuffer{}}
	done := make(chan int, 1)
	go func() {
		a := &app{ctx: ctx, stdin: strings.NewReader(""), stdout: io.Discard, stderr: s.stderr,
			getenv: func(k string) string {
				if k == envToken {
					return token
				}
				return ""
			},
			isTerminal: func(io.Reader) bool { return false }, newTicker: realTicker}
		done <- a.run(append([]string{"serve", path}, args...))
	}()
	stopped := false
	s.stop = func() int {
		stopped = true
		cancel()
		select {
		case code := <-done:
			return code
		case <-time.After(waitLimit):
			t.Fatal("serve did not stop when interrupted")
		}
		return -1
	}
	t.Cleanup(func() {
		if !stopped {
			s.stop()
		}
	})
	re := regexp.MustCompile(`(https?://127\.0\.0\.1:\d+)/`)
	for deadline := time.Now().Add(waitLimit); s.base == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(s.stderr.String()); m != nil {
			s.base = m[1]
		}
		select {
		case code := <-done:
			t.Fatalf("serve ended with %d: %s", code, s.stderr.String())
		default:
		}
	}
	require.NotEmpty(t, s.base, "serve did not say where it listens: %s", s.stderr.String())
	return s
}

func TestServeServesTheDashboardAndMetricsUntilInterrupted(t *testing.T) {
	fx := newFixture(t)
	s := startServe(t, fx.path, serveToken, "--read-only", "--addr", "127.0.0.1:0")

	resp, err := http.Get(s.base + "/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the token from the environment is required")

	for path, want := range map[string]string{"/dead": "bad csv header", "/metrics": `litequeue_jobs{queue="imports",state="dead"} 3`,
		"/queues": `data-live="imports/state" data-live-class="state">active<`, "/schedules": "No schedules"} {
		req, _ := http.NewRequest("GET", s.base+path, nil)
		req.Header.Set("Authorization", "Bearer "+serveToken)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode, path)
		require.Contains(t, string(b), want, path)
	}
	require.Equal(t, exitOK, s.stop(), s.stderr.String())
}

// Without a token, serve answers only its own host names: a request sent
// to it with another name as the Host (a DNS-rebinding page's) is refused.
func TestServeWithoutATokenRefusesForeignHosts(t *testing.T) {
	fx := newFixture(t)
	s := startServe(t, fx.path, "", "--read-only", "--addr", "127.0.0.1:0")
	u, err := url.Parse(s.base)
	require.NoError(t, err)
	_, port, _ := net.SplitHostPort(u.Host)
	for host, want := range map[string]int{u.Host: 200, "localhost:" + port: 200, "evil.example:" + port: http.StatusMisdirectedRequest} {
		c, err := net.Dial("tcp", u.Host)
		require.NoError(t, err)
		_, err = io.WriteString(c, "GET /dead HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		resp.Body.Close()
		c.Close()
		require.Equal(t, want, resp.StatusCode, host)
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key, as PEM files
// in dir, and returns their paths and the certificate.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "lqinspect test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err = x509.ParseCertificate(der)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600))
	return certFile, keyFile, cert
}

// With --tls-cert and --tls-key, serve speaks HTTPS only, and the sign-in
// cookie is a __Host- session cookie.
func TestServeOverTLS(t *testing.T) {
	fx := newFixture(t)
	certFile, keyFile, cert := selfSigned(t, t.TempDir())
	s := startServe(t, fx.path, serveToken, "--addr", "127.0.0.1:0", "--tls-cert", certFile, "--tls-key", keyFile)
	require.True(t, strings.HasPrefix(s.base, "https://"), s.stderr.String())
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(s.base + "/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, err = c.PostForm(s.base+"/login", url.Values{"token": {serveToken}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	cookies := resp.Cookies()
	require.Len(t, cookies, 1)
	require.Equal(t, "__Host-lq_session", cookies[0].Name)
	require.True(t, cookies[0].Secure)
	require.NotContains(t, cookies[0].Value, serveToken)

	plain, err := http.Get(strings.Replace(s.base, "https://", "http://", 1) + "/")
	if err == nil {
		plain.Body.Close()
		require.Equal(t, http.StatusBadRequest, plain.StatusCode, "plain HTTP to the TLS port")
	}
	require.Equal(t, exitOK, s.stop(), s.stderr.String())
}
