package cache

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// This file holds how a Reflector lists: pages, continuations, and the
// errors that make it relist at the latest state.

// list lists the resource into the store, retrying at once at the latest
// state when the asked-for resourceVersion is gone or too new.
func (r *Reflector) list(ctx context.Context) error {
	items, rv, err := r.listPages(ctx, r.relistResourceVersion())
	if isExpired(err) || isTooLargeResourceVersion(err) {
		r.setUnavailable(true)
		items, rv, err = r.listPages(ctx, r.relistResourceVersion())
	}
	if err != nil {
		return fmt.Errorf("cache: reflector %s: list: %w", r.name, err)
	}
	r.setUnavailable(false)
	if err := r.prepareList(items); err != nil {
		return fmt.Errorf("cache: reflector %s: list: %w", r.name, err)
	}
	if err := r.store.Replace(items, rv); err != nil {
		return fmt.Errorf("cache: reflector %s: replacing the store's contents: %w", r.name, err)
	}
	r.setLastSyncResourceVersion(rv)
	return nil
}

// listPages lists the resource at rv, following continue tokens, and returns
// the items and the list's resourceVersion.
func (r *Reflector) listPages(ctx context.Context, rv string) ([]any, string, error) {
	opts := metav1.ListOptions{ResourceVersion: rv}
	r.mu.Lock()
	paginated := r.paginatedResult
	r.mu.Unlock()
	// A relist at a known resourceVersion is served whole from the watch
	// cache, unless an earlier list showed there is none.
	if paginated || rv == "" || rv == "0" {
		opts.Limit = r.opts.PageSize
	}

	var items []any
	var listRV string
	pages := 0
	next := opts
	for {
		obj, err := r.lw.List(ctx, next)
		if err != nil {
			if pages > 0 && isExpired(err) {
				// The continuation expired: ask for everything at once at
				// the original resourceVersion.
				full := opts
				full.Limit = 0
				obj, err = r.lw.List(ctx, full)
				if err != nil {
					return nil, "", err
				}
				items, listRV, _, err = extractList(obj, nil)
				return items, listRV, err
			}
			return nil, "", err
		}
		pages++
		var cont string
		items, listRV, cont, err = extractList(obj, items)
		if err != nil {
			return nil, "", err
		}
		if cont == "" {
			break
		}
		next = metav1.ListOptions{Limit: opts.Limit, Continue: cont}
	}
	if rv == "0" {
		r.mu.Lock()
		r.paginatedResult = pages > 1
		r.mu.Unlock()
	}
	return items, listRV, nil
}

// extractList appends the items of a list object to items and returns them
// with the list's resourceVersion and continue token.
func extractList(obj runtime.Object, items []any) ([]any, string, string, error) {
	lm, err := meta.ListAccessor(obj)
	if err != nil {
		return nil, "", "", fmt.Errorf("unable to understand list result %T: %w", obj, err)
	}
	objs, err := meta.ExtractListWithAlloc(obj)
	if err != nil {
		return nil, "", "", fmt.Errorf("unable to extract the items of list result %T: %w", obj, err)
	}
	if items == nil {
		items = make([]any, 0, len(objs))
	}
	for _, o := range objs {
		items = append(items, o)
	}
	return items, lm.GetResourceVersion(), lm.GetContinue(), nil
}

// isExpired reports whether err says a resourceVersion is no longer
// available (410 Gone or Expired).
func isExpired(err error) bool {
	return err != nil && (apierrors.IsResourceExpired(err) || apierrors.IsGone(err))
}

// isTooLargeResourceVersion reports whether err says the asked-for
// resourceVersion is newer than the server has.
func isTooLargeResourceVersion(err error) bool {
	if err == nil {
		return false
	}
	if apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) {
		return true
	}
	// Servers before the cause existed sent only the message.
	if !apierrors.IsTimeout(err) {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if d := status.Status().Details; d != nil {
			for _, c := range d.Causes {
				if c.Message == "Too large resource version" {
					return true
				}
			}
		}
	}
	return false
}
