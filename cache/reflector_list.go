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
	l, err := r.listPages(ctx, r.relistResourceVersion())
	if isExpired(err) || isTooLargeResourceVersion(err) {
		r.setUnavailable(true)
		l, err = r.listPages(ctx, r.relistResourceVersion())
	}
	if err != nil {
		return fmt.Errorf("cache: reflector %s: list: %w", r.name, err)
	}
	r.setUnavailable(false)
	if err := r.prepareList(l.items); err != nil {
		return fmt.Errorf("cache: reflector %s: list: %w", r.name, err)
	}
	if r.arenas != nil {
		// Pages whose objects a transform replaced hold nothing of the
		// store: only pages with objects still in place are tracked.
		l.pages = pagesInPlace(l.pages, l.pageLens, l.items)
		r.arenas.add(l.pages)
	}
	if err := r.store.Replace(l.items, l.rv); err != nil {
		if r.arenas != nil {
			r.arenas.forget(l.pages)
		}
		return fmt.Errorf("cache: reflector %s: replacing the store's contents: %w", r.name, err)
	}
	r.setLastSyncResourceVersion(l.rv)
	return nil
}

// listResult is what listPages gathered: the objects, the list's
// resourceVersion, and the list objects they came from.
type listResult struct {
	items []any
	rv    string
	// pages are the list objects, pageLens how many of items came from
	// each.
	pages    []runtime.Object
	pageLens []int
}

// listPages lists the resource at rv, following continue tokens.
func (r *Reflector) listPages(ctx context.Context, rv string) (listResult, error) {
	opts := metav1.ListOptions{ResourceVersion: rv}
	r.mu.Lock()
	paginated := r.paginatedResult
	r.mu.Unlock()
	// A relist at a known resourceVersion is served whole from the watch
	// cache, unless an earlier list showed there is none.
	if paginated || rv == "" || rv == "0" {
		opts.Limit = r.opts.PageSize
	}

	var l listResult
	next := opts
	for {
		obj, err := r.lw.List(ctx, next)
		if err != nil {
			if len(l.pages) > 0 && isExpired(err) {
				// The continuation expired: ask for everything at once at
				// the original resourceVersion.
				full := opts
				full.Limit = 0
				obj, err = r.lw.List(ctx, full)
				if err != nil {
					return listResult{}, err
				}
				l = listResult{}
				_, err = r.extractList(obj, &l)
				return l, err
			}
			return listResult{}, err
		}
		cont, err := r.extractList(obj, &l)
		if err != nil {
			return listResult{}, err
		}
		if cont == "" {
			break
		}
		next = metav1.ListOptions{Limit: opts.Limit, Continue: cont}
	}
	if rv == "0" {
		r.mu.Lock()
		r.paginatedResult = len(l.pages) > 1
		r.mu.Unlock()
	}
	return l, nil
}

// extractList appends the items, resourceVersion and page of a list object
// to l and returns its continue token.
//
// A reflector that feeds an informer takes the items in place, pointing
// into the list's array, and the informer keeps that from pinning the
// array (see arenaSet). Any other reflector copies each item into its own
// allocation, as client-go does, since a plain store could otherwise keep
// a whole list alive through one object.
func (r *Reflector) extractList(obj runtime.Object, l *listResult) (string, error) {
	lm, err := meta.ListAccessor(obj)
	if err != nil {
		return "", fmt.Errorf("unable to understand list result %T: %w", obj, err)
	}
	var objs []runtime.Object
	if r.arenas != nil {
		objs, err = meta.ExtractList(obj)
	} else {
		objs, err = meta.ExtractListWithAlloc(obj)
	}
	if err != nil {
		return "", fmt.Errorf("unable to extract the items of list result %T: %w", obj, err)
	}
	if l.items == nil {
		l.items = make([]any, 0, len(objs))
	}
	for _, o := range objs {
		l.items = append(l.items, o)
	}
	l.rv = lm.GetResourceVersion()
	l.pages = append(l.pages, obj)
	l.pageLens = append(l.pageLens, len(objs))
	return lm.GetContinue(), nil
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
