package cachetest

import (
	"errors"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The errors below carry the apiserver's codes, reasons, causes and
// messages, so that client code classifying them with apierrors (IsConflict,
// IsResourceExpired, IsGone, IsTimeout, HasStatusCause) behaves as against a
// real cluster.

// NewTooLargeResourceVersionError returns the error an apiserver answers a
// read at a resourceVersion it has not reached: a 504 Timeout whose cause
// is ResourceVersionTooLarge, with the apiserver's message. The server
// returns it by itself (see [Server.List]); it is exported so that tests can
// inject it with [Server.FailNextLists] without rewinding the server.
func NewTooLargeResourceVersionError(requested, current uint64) error {
	return tooLargeResourceVersion(requested, current)
}

// tooLargeResourceVersion is the 504 a "not older than" read gets when the
// server has not reached the requested resourceVersion in time.
func tooLargeResourceVersion(want, current uint64) error {
	err := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", want, current), 1)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{
		Type:    metav1.CauseTypeResourceVersionTooLarge,
		Message: "Too large resource version",
	}}
	return err
}

// listTooOld is the 410 of an exact list below the retained history.
func listTooOld() error {
	return apierrors.NewResourceExpired("The resourceVersion for the provided list is too old.")
}

// watchTooOld is the 410 a watch from before the retained history receives
// as an ERROR event; the message is the watch cache's.
func watchTooOld(rv, compacted uint64) error {
	return apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", rv, compacted))
}

// continueTooOld is the 410 of a continue token whose snapshot fell out of
// the history. Like etcd-backed apiservers it carries, in its ListMeta, a
// token that continues from the same key at the latest state, for clients
// that accept an inconsistent list.
func continueTooOld(latest string) error {
	err := apierrors.NewResourceExpired("The provided continue parameter is too old " +
		"to display a consistent list result. You can start a new list without " +
		"the continue parameter, or use the continue token in this response to " +
		"retrieve the remainder of the results. Continuing with the provided " +
		"token results in an inconsistent list - objects that were created, " +
		"modified, or deleted between the time the first chunk was returned " +
		"and now may show up in the list.")
	err.ErrStatus.ListMeta.Continue = latest
	return err
}

// badRequest is a 400 with a message prefixed by the package name.
func badRequest(format string, args ...any) error {
	return apierrors.NewBadRequest("cachetest: " + fmt.Sprintf(format, args...))
}

// parseRV parses a resourceVersion; "" and "0" both parse to 0.
func parseRV(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, badRequest("invalid resourceVersion %q: must be a decimal number", s)
	}
	return v, nil
}

func formatRV(rv uint64) string { return strconv.FormatUint(rv, 10) }

// errorStatus returns the status a watch.Error event carries for err: its
// own when it is an API status error, else a 500 InternalError.
func errorStatus(err error) *metav1.Status {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		s := st.Status()
		return &s
	}
	s := apierrors.NewInternalError(err).Status()
	return &s
}
