package provision

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetkit/fleet/inventory"
	wfrun "github.com/fleetkit/fleet/provision/internal/runs"
)

// The bootstrap token Secret's shape, as Kubernetes' bootstrap token
// authenticator and Talos's kubelet expect it.
const (
	tokenNamespace   = "kube-system"
	tokenSecretType  = corev1.SecretType("bootstrap.kubernetes.io/token")
	tokenExtraGroups = "system:bootstrappers:nodes"
	// TokenGrace is how much longer than the config's TTL a bootstrap
	// token lives: the node must finish its first certificate request
	// after it fetched its config.
	TokenGrace = 4 * time.Hour
)

// Labels and annotations fleet puts on the objects it creates.
const (
	LabelManagedBy  = "app.kubernetes.io/managed-by"
	managedBy       = "fleet"
	LabelDeviceID   = wfrun.LabelDeviceID
	LabelRunKind    = wfrun.LabelRunKind
	annNode         = wfrun.AnnNode
	annHookOS       = wfrun.AnnHookOS
	annReported     = wfrun.AnnReported
	annBootedHookOS = "fleet.fleetkit.dev/booted-hookos-noted"
	annCreated      = wfrun.AnnCreated
	// annRun names, on a bootstrap token's Secret, the run it was made for.
	annRun = "fleet.fleetkit.dev/run"
	// annToken names, on a run's Workflow, its bootstrap token's Secret
	// (bootstrap-token-<token id>; the id is no secret), so that the
	// token is deleted by name when the run goes, without listing the
	// Secrets of kube-system.
	annToken = "fleet.fleetkit.dev/bootstrap-token"
)

const tokenAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// randomToken returns n characters of tokenAlphabet, uniformly drawn.
func randomToken(n int) (string, error) {
	out := make([]byte, 0, n)
	buf := make([]byte, 2*n)
	limit := 256 - 256%len(tokenAlphabet)
	for len(out) < n {
		if _, err := rand.Read(buf); err != nil {
			return "", err
		}
		for _, c := range buf {
			if int(c) < limit && len(out) < n {
				out = append(out, tokenAlphabet[int(c)%len(tokenAlphabet)])
			}
		}
	}
	return string(out), nil
}

// bootToken is a node's bootstrap token: its id (public: it names the
// Secret, bootstrap-token-<id>, and the token's user) and its secret.
type bootToken struct {
	id, secret string
}

// newBootToken draws a bootstrap token: 6 and 16 characters of
// [a-z0-9], as kubeadm's tokens are.
func newBootToken() (bootToken, error) {
	id, err := randomToken(6)
	if err != nil {
		return bootToken{}, err
	}
	secret, err := randomToken(16)
	if err != nil {
		return bootToken{}, err
	}
	return bootToken{id: id, secret: secret}, nil
}

// secretName is the name of tok's Secret in kube-system; "" for no token.
func (tok bootToken) secretName() string {
	if tok.id == "" {
		return ""
	}
	return "bootstrap-token-" + tok.id
}

// String is the token as a kubelet presents it, <id>.<secret>: a secret.
func (tok bootToken) String() string { return tok.id + "." + tok.secret }

// createToken creates tok in the cluster as dev's bootstrap token for
// run: a Secret bootstrap-token-<id> in kube-system of type
// bootstrap.kubernetes.io/token, with usage-bootstrap-authentication and
// usage-bootstrap-signing, auth-extra-groups system:bootstrappers:nodes,
// and an expiration (RFC 3339) ConfigTTL (FLEET_CONFIG_TTL) + TokenGrace
// after now, and returns the expiry. The error reads "create <node>'s
// bootstrap token: <cause>" and wraps ErrBootstrapToken.
func (p *Provisioner) createToken(ctx context.Context, dev inventory.Device, run string, tok bootToken, now time.Time) (expires time.Time, err error) {
	expires = now.Add(p.cfg.ConfigTTL + TokenGrace).UTC().Truncate(time.Second)
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      tok.secretName(),
			Namespace: tokenNamespace,
			Labels: map[string]string{
				LabelManagedBy: managedBy,
				LabelDeviceID:  strconv.FormatInt(dev.ID, 10),
			},
			Annotations: map[string]string{annNode: dev.Name, annRun: run},
		},
		Type: tokenSecretType,
		Data: map[string][]byte{
			"description":                    []byte(fmt.Sprintf("fleet: %s's bootstrap token for %s", dev.Name, run)),
			"token-id":                       []byte(tok.id),
			"token-secret":                   []byte(tok.secret),
			"expiration":                     []byte(expires.Format(time.RFC3339)),
			"usage-bootstrap-authentication": []byte("true"),
			"usage-bootstrap-signing":        []byte("true"),
			"auth-extra-groups":              []byte(tokenExtraGroups),
		},
	}
	if _, err := p.kube.CoreV1().Secrets(tokenNamespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		return time.Time{}, &tokenError{node: dev.Name, err: err}
	}
	return expires, nil
}

// deleteToken deletes the Secret of a token whose run did not start; one
// that was never created is no error. A failure is logged and returned:
// the run's Workflow, which names the token, is then kept for the run that
// supersedes it to delete both.
func (p *Provisioner) deleteToken(ctx context.Context, name string) error {
	if name == "" {
		return nil
	}
	err := p.kube.CoreV1().Secrets(tokenNamespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		p.log.Warn("fleet.render", "secret", name, "error", "delete the bootstrap token of a run that did not start: "+err.Error())
		return err
	}
	return nil
}

// deleteRunTokens deletes the bootstrap tokens of runs (their Workflows
// name them), as a run that is replaced, deleted or ended without success
// leaves no token that could still join a node to the cluster. A token
// already gone is no error.
func (p *Provisioner) deleteRunTokens(ctx context.Context, runs ...*run) error {
	var errs []error
	for _, r := range runs {
		name := r.WF.Annotations[annToken]
		if name == "" {
			continue
		}
		err := p.kube.CoreV1().Secrets(tokenNamespace).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete the bootstrap token %s of %s: %w", name, r.Name(), err))
			continue
		}
		if err == nil {
			p.log.Info("fleet.render", "secret", name, "run", r.Name(), "deleted", "the run it was made for was replaced, deleted or ended without success")
		}
	}
	return errors.Join(errs...)
}

type tokenError struct {
	node string
	err  error
}

func (e *tokenError) Error() string {
	return fmt.Sprintf("create %s's bootstrap token: %v", e.node, e.err)
}

func (e *tokenError) Unwrap() []error { return []error{e.err, ErrBootstrapToken} }
