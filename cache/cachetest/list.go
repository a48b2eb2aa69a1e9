package cachetest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// List returns the objects of resource gvr in namespace ("" for all
// namespaces) selected by opts, as the resource's list type with
// ListMeta.ResourceVersion set to the resourceVersion of the state it
// shows. Items are in key order (namespace, then name) and are copies.
//
// resourceVersion semantics, as in the apiserver with its watch cache:
//   - "" (no continue): the latest state (a consistent read); Limit pages.
//   - "0": any state; the latest is served and Limit is ignored, as the
//     watch cache does, so the whole list comes in one page.
//   - "N" with ResourceVersionMatch Exact, or with no match and Limit > 0
//     (the legacy rule): the state at N, reconstructed from the history;
//     410 Expired when N is older than the history, 504 "Too large resource
//     version" when N is in the future.
//   - "N" with NotOlderThan, or with no match and no Limit: the latest
//     state once it is at least N; the call waits up to
//     Options.FreshnessTimeout for N, then fails with a 504 Timeout whose
//     cause is ResourceVersionTooLarge.
//
// With Limit > 0 a page holds at most Limit items and, when more remain,
// ListMeta.Continue holds a token; passing it as Continue (with an empty
// resourceVersion) returns the next page of the same snapshot, so paging
// sees every object of that state exactly once even while writes happen.
// A token whose snapshot has left the history gets 410 Expired, whose
// status carries a token continuing at the latest state.
// RemainingItemCount is set when no label or field selector is used.
//
// Malformed options fail like the apiserver's validation: 422 Invalid for
// inconsistent resourceVersion/resourceVersionMatch/continue combinations,
// 400 BadRequest for bad selectors, resourceVersions or tokens and for a
// namespace on a cluster-scoped resource; an unregistered resource is 404.
// Every call is recorded ([Server.Requests]) and first subject to the
// injected delay and failures ([Server.SetListDelay],
// [Server.FailNextLists]).
func (s *Server) List(ctx context.Context, gvr schema.GroupVersionResource, namespace string, opts metav1.ListOptions) (runtime.Object, error) {
	if err := s.admit(ctx, Request{Verb: "list", GVR: gvr, Namespace: namespace, Options: opts}); err != nil {
		return nil, err
	}
	if err := validateListOptions(opts); err != nil {
		return nil, err
	}
	rv, err := parseRV(opts.ResourceVersion)
	if err != nil {
		return nil, err
	}
	r, err := s.lookup(gvr)
	if err != nil {
		return nil, err
	}
	if err := r.checkNamespace(namespace); err != nil {
		return nil, err
	}
	sel, err := newSelector(r, namespace, opts)
	if err != nil {
		return nil, err
	}
	at := listAt{limit: opts.Limit}
	switch {
	case opts.Continue != "":
		if opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
			return nil, badRequest("specifying resource version is not allowed when using continue")
		}
		start, tokenRV, err := decodeContinue(opts.Continue)
		if err != nil {
			return nil, err
		}
		at.start, at.token = start, true
		if tokenRV > 0 { // -1 continues at the latest state
			at.rv = uint64(tokenRV)
		}
	case opts.ResourceVersion == "0":
		at.limit = 0
	case opts.ResourceVersion == "":
	case opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact,
		opts.ResourceVersionMatch == "" && opts.Limit > 0:
		at.rv = rv
	default:
		if err := s.waitFresh(ctx, rv); err != nil {
			return nil, err
		}
	}
	p, err := s.page(r, sel, at)
	if err != nil {
		return nil, err
	}
	// Outside the lock: NewList is the caller's code, and the stored
	// objects are never mutated, so copying them now is safe.
	for i, obj := range p.items {
		p.items[i] = s.copyObject(obj)
	}
	list := r.NewList()
	if err := meta.SetList(list, p.items); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("cachetest: filling %T: %w", list, err))
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("cachetest: %T has no ListMeta: %w", list, err))
	}
	lm.SetResourceVersion(formatRV(p.rv))
	lm.SetContinue(p.cont)
	lm.SetRemainingItemCount(p.remaining)
	return list, nil
}

// listPage is one page of a list, holding stored objects.
type listPage struct {
	items     []runtime.Object
	rv        uint64
	cont      string
	remaining *int64
}

// listAt says which page of which state a list asks for.
type listAt struct {
	rv    uint64 // the state's resourceVersion; 0 for the latest
	token bool   // from a continue token (else an exact resourceVersion)
	start string // the page starts after this key
	limit int64  // at most this many items when > 0
}

// page returns the selected objects of the page at asks for.
func (s *Server) page(r *resource, sel selector, at listAt) (listPage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := s.rv
	switch {
	case at.rv == 0:
	case at.token && at.rv > s.rv:
		return listPage{}, badRequest("invalid continue token: resourceVersion %d is in the future", at.rv)
	case at.token && at.rv < r.compacted:
		return listPage{}, continueTooOld(encodeContinue(at.start, -1))
	case at.rv > s.rv:
		return listPage{}, tooLargeResourceVersion(at.rv, s.rv)
	case at.rv < r.compacted:
		return listPage{}, listTooOld()
	default:
		snap = at.rv
	}
	v := r.snapshot(snap)
	// Keys sort by namespace first, so one namespace is one range.
	lo, hi := 0, len(v.keys)
	if r.Namespaced && sel.namespace != "" {
		lo, _ = slices.BinarySearch(v.keys, sel.namespace+"/")
		hi, _ = slices.BinarySearch(v.keys, sel.namespace+"0") // '0' follows '/'
	}
	if at.start != "" {
		after, found := slices.BinarySearch(v.keys, at.start)
		if found {
			after++
		}
		lo = max(lo, after)
	}
	p := listPage{rv: snap}
	var last string
	for i := lo; i < hi; i++ {
		k := v.keys[i]
		obj := v.get(k)
		if sel.filtered() && !sel.matches(obj) {
			continue
		}
		if at.limit > 0 && int64(len(p.items)) == at.limit {
			// There are more. Without selectors every key left matches, and
			// the apiserver says how many; with selectors it does not.
			p.cont = encodeContinue(last, int64(snap))
			if !sel.filtered() {
				n := int64(hi - i)
				p.remaining = &n
			}
			break
		}
		p.items = append(p.items, obj)
		last = k
	}
	return p, nil
}

// continueToken is what a continue token encodes, in the apiserver's shape:
// the snapshot's resourceVersion (-1 for "the latest") and the last key
// returned.
type continueToken struct {
	APIVersion      string `json:"v"`
	ResourceVersion int64  `json:"rv"`
	StartKey        string `json:"start"`
}

const continueAPIVersion = "meta.k8s.io/v1"

func encodeContinue(key string, rv int64) string {
	b, _ := json.Marshal(continueToken{APIVersion: continueAPIVersion, ResourceVersion: rv, StartKey: key})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeContinue(token string) (key string, rv int64, err error) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return "", 0, badRequest("invalid continue token: %v", err)
	}
	var c continueToken
	if err := json.Unmarshal(b, &c); err != nil {
		return "", 0, badRequest("invalid continue token: %v", err)
	}
	switch {
	case c.APIVersion != continueAPIVersion:
		return "", 0, badRequest("invalid continue token: unknown version %q", c.APIVersion)
	case c.ResourceVersion == 0 || c.ResourceVersion < -1:
		return "", 0, badRequest("invalid continue token: bad resourceVersion %d", c.ResourceVersion)
	case c.StartKey == "":
		return "", 0, badRequest("invalid continue token: empty start key")
	}
	return c.StartKey, c.ResourceVersion, nil
}

// validateListOptions mirrors the apiserver's validation of list options.
func validateListOptions(opts metav1.ListOptions) error {
	var errs field.ErrorList
	match := field.NewPath("resourceVersionMatch")
	if m := opts.ResourceVersionMatch; m != "" {
		if opts.ResourceVersion == "" {
			errs = append(errs, field.Forbidden(match, "resourceVersionMatch is forbidden unless resourceVersion is provided"))
		}
		if opts.Continue != "" {
			errs = append(errs, field.Forbidden(match, "resourceVersionMatch is forbidden when continue is provided"))
		}
		if m != metav1.ResourceVersionMatchExact && m != metav1.ResourceVersionMatchNotOlderThan {
			errs = append(errs, field.NotSupported(match, m, []string{string(metav1.ResourceVersionMatchExact), string(metav1.ResourceVersionMatchNotOlderThan), ""}))
		}
		if m == metav1.ResourceVersionMatchExact && opts.ResourceVersion == "0" {
			errs = append(errs, field.Forbidden(match, `resourceVersionMatch "exact" is forbidden for resourceVersion "0"`))
		}
	}
	if opts.SendInitialEvents != nil {
		errs = append(errs, field.Forbidden(field.NewPath("sendInitialEvents"), "sendInitialEvents is forbidden for list"))
	}
	return invalidOptions(errs)
}

// invalidOptions turns validation errors into the apiserver's 422.
func invalidOptions(errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", errs)
}
