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

// bootstrapToken creates dev's bootstrap token in the cluster as a Secret
// bootstrap-token-<id> in kube-system of type bootstrap.kubernetes.io/token,
// with usage-bootstrap-authentication and usage-bootstrap-signing,
// auth-extra-groups system:bootstrappers:nodes, and an expiration (RFC
// 3339) ConfigTTL (FLEET_CONFIG_TTL) + TokenGrace after now, and returns
// the token (a secret, the config's cluster.token) and its expiry. The error
// reads "create <node>'s bootstrap token: <cause>" and wraps
// ErrBootstrapToken.
func (p *Provisioner) bootstrapToken(ctx context.Context, dev inventory.Device, run string, now time.Time) (token, secretName string, expires time.Time, err error) {
	fail := func(err error) (string, string, time.Time, error) {
		return "", "", time.Time{}, &tokenError{node: dev.Name, err: err}
	}
	id, err := randomToken(6)
	if err != nil {
		return fail(err)
	}
	secret, err := randomToken(16)
	if err != nil {
		return fail(err)
	}
	expires = now.Add(p.cfg.ConfigTTL + TokenGrace).UTC().Truncate(time.Second)
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      "bootstrap-token-" + id,
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
			"token-id":                       []byte(id),
			"token-secret":                   []byte(secret),
			"expiration":                     []byte(expires.Format(time.RFC3339)),
			"usage-bootstrap-authentication": []byte("true"),
			"usage-bootstrap-signing":        []byte("true"),
			"auth-extra-groups":              []byte(tokenExtraGroups),
		},
	}
	if _, err := p.kube.CoreV1().Secrets(tokenNamespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		return fail(err)
	}
	return id + "." + secret, s.Name, expires, nil
}

// deleteToken deletes the Secret of a token whose run did not start. A
// failure is logged: the token expires on its own.
func (p *Provisioner) deleteToken(ctx context.Context, name string) {
	err := p.kube.CoreV1().Secrets(tokenNamespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		p.log.Warn("fleet.render", "secret", name, "error", "delete the bootstrap token of a run that did not start: "+err.Error())
	}
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
