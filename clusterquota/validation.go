package clusterquota

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/quotakit/quotakit/quota"
)

// The bounds [Validate] applies beyond Kubernetes' own rules, and the CRD
// states too, so that what one accepts the other does. Each is far above
// what a real quota needs; they exist so that one object cannot make
// every admission check slow, or the API server's CEL validation of the
// object exceed its cost budget.
const (
	// MaxQuantity is the largest quantity, in the resource's base unit
	// (bytes, cores, objects), that a ClusterQuota may hold: 2^63-1, the
	// range resource.Quantity documents (no quantity "may represent a
	// number greater than 2^63-1 in magnitude"). It bounds
	// spec.quota.hard and every quantity of the status.
	//
	// It is 8 EiB of memory or storage, 9.2 billion billion pods or
	// cores: a real cluster's limits (a petabyte of memory, a million
	// pods) are thousands of times smaller. It is also where
	// resource.ParseQuantity caps a quantity written with a binary
	// suffix, so that "100Ei", a common way to write "no limit", reads
	// as MaxQuantity and stays valid; "1e19" or "10E" is invalid. A bound
	// in int64 milli-units (9.2e15, about 8 PiB) would refuse storage
	// limits of tens of petabytes, which a quota over a large tenant's
	// namespaces may well set.
	//
	// Above it, a quantity such as 1e1000000 is held as a small number
	// and a huge exponent, and every sum or comparison with it (one per
	// admission check) takes tens of milliseconds. For the same reason a
	// quantity held with a decimal exponent beyond ±300 is invalid
	// whatever its value (0e1000000 is zero), which no quantity written
	// as Kubernetes writes them comes near.
	MaxQuantity = math.MaxInt64

	// MaxResources is the most resources one resource list of a
	// ClusterQuota may name: spec.quota.hard, status.total.hard and
	// .used, and each namespace's hard and used.
	MaxResources = 256

	// MaxSelectorTerms is the most entries each of
	// spec.selector.labels.matchLabels, spec.selector.labels.matchExpressions
	// and spec.selector.annotations may have.
	MaxSelectorTerms = 32

	// MaxSelectorValues is the most values one requirement of
	// spec.selector.labels.matchExpressions may list.
	MaxSelectorValues = 256

	// MaxAnnotationValueLength is the most characters (Unicode code
	// points, as the CRD's maxLength counts them) of a value of
	// spec.selector.annotations. With [MaxSelectorTerms] it keeps the
	// annotations within Kubernetes' 256 KiB limit on annotations.
	MaxAnnotationValueLength = 1024
)

// maxQuantityExponent bounds the decimal exponent a quantity is held
// with (see [MaxQuantity]). The CRD's pattern allows exponents of two
// digits and strings of 64 characters, which stay within it.
const maxQuantityExponent = 300

// ValidationError is the error [Validate] returns: every problem found in
// one ClusterQuota, as field errors in kube-apiserver's form, in the order
// of the object's fields (resource names in name order).
//
// A webhook or API server that must answer with kube-apiserver's 422
// builds it with k8s.io/apimachinery's errors.NewInvalid(
// Kind("ClusterQuota"), e.Name, e.Errors).
type ValidationError struct {
	// Name is the quota's metadata.name.
	Name string
	// Errors are the problems, never empty.
	Errors field.ErrorList
}

// Error returns the problems in kube-apiserver's words, after the
// package's prefix.
func (e *ValidationError) Error() string {
	return fmt.Sprintf("clusterquota: ClusterQuota.%s %q is invalid: %v", GroupName, e.Name, e.Errors.ToAggregate())
}

// Unwrap returns each field error, for errors.As with *field.Error.
func (e *ValidationError) Unwrap() []error {
	out := make([]error, len(e.Errors))
	for i, fe := range e.Errors {
		out[i] = fe
	}
	return out
}

// Validate checks cq as kube-apiserver would check it if ClusterQuota
// were built in, and returns a [*ValidationError] listing every problem,
// or nil. It checks:
//
//   - metadata as for any cluster-scoped object: a DNS-subdomain name
//     (required, as the API server generates it from generateName before
//     it validates), no namespace, valid labels and annotations;
//   - spec.selector as OpenShift does: at least one part set, a label
//     selector with at least one requirement and valid keys, operators
//     and values, annotation keys that are qualified names; and within
//     [MaxSelectorTerms], [MaxSelectorValues] and
//     [MaxAnnotationValueLength];
//   - spec.quota as ResourceQuota's spec: resource names that are
//     standard quota resources or qualified names with a "/", quantities
//     that are not negative and whole for counted resources, known
//     scopes, scopes that apply to every standard resource of hard, no
//     conflicting scopes, and scope selector operators and values as
//     Kubernetes 1.37 allows them; and at most [MaxResources] resources,
//     each at most [MaxQuantity];
//   - status.total and each entry of status.namespaces as a
//     ResourceQuota's status, with the same bounds, plus the
//     bounded-status rule's checks: at most [MaxNamespaceStatuses]
//     entries, each a DNS label and listed once, and
//     status.namespacesOmitted not negative.
//
// The CRD (kube/deploy/crd) rejects what Validate rejects as far as a
// structural schema and CEL can say it within the API server's cost
// budget: the selector's keys, values, operators and bounds, quantity
// syntax, sign and bound, scope names and operators, the namespaces'
// names. It cannot say which resource names are quota resources, which
// scopes fit which resources, which resources must be whole, or that a
// namespace is listed once; nor bound the quantities of
// status.namespaces, whose CEL cost (a thousand entries of
// [MaxResources] quantities) is over the budget. A test in the e2e
// module runs every case of this package's tests through the API
// server's own validators to keep the two in step. Validate is the whole
// rule, for a webhook and for a controller that must skip a quota the
// API server let through (one stored under an older CRD, or written to
// etcd directly). A nil cq is an error, never a panic, and Validate takes
// time in proportion to the object's size, whatever its quantities.
func Validate(cq *ClusterQuota) error {
	if cq == nil {
		return errors.New("clusterquota: Validate: nil ClusterQuota")
	}
	errs := apivalidation.ValidateObjectMeta(&cq.ObjectMeta, false, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	errs = append(errs, validateSelector(&cq.Spec.Selector, field.NewPath("spec", "selector"))...)
	errs = append(errs, validateQuotaSpec(&cq.Spec.Quota, field.NewPath("spec", "quota"))...)
	errs = append(errs, validateStatus(&cq.Status, field.NewPath("status"))...)
	if len(errs) == 0 {
		return nil
	}
	return &ValidationError{Name: cq.Name, Errors: errs}
}

// validateSelector checks sel as OpenShift's ClusterResourceQuota
// validation does.
func validateSelector(sel *ClusterQuotaSelector, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	labelsSet := sel.LabelSelector != nil && !isEmptyLabelSelector(sel.LabelSelector)
	if !labelsSet && len(sel.AnnotationSelector) == 0 {
		errs = append(errs, field.Required(path, "must restrict the selected namespaces: set labels, annotations or both"))
	}
	if ls := sel.LabelSelector; ls != nil {
		lpath := path.Child("labels")
		errs = append(errs, metav1validation.ValidateLabelSelector(ls, metav1validation.LabelSelectorValidationOptions{}, lpath)...)
		errs = append(errs, validateSelectorBounds(ls, lpath)...)
		if !labelsSet {
			errs = append(errs, field.Invalid(lpath, ls, "must restrict the selected namespaces: an empty label selector would select every namespace"))
		}
	}
	if sel.AnnotationSelector != nil {
		apath := path.Child("annotations")
		errs = append(errs, apivalidation.ValidateAnnotations(sel.AnnotationSelector, apath)...)
		if n := len(sel.AnnotationSelector); n > MaxSelectorTerms {
			errs = append(errs, field.TooMany(apath, n, MaxSelectorTerms))
		}
		for _, k := range slices.Sorted(maps.Keys(sel.AnnotationSelector)) {
			if v := sel.AnnotationSelector[k]; utf8.RuneCountInString(v) > MaxAnnotationValueLength {
				errs = append(errs, field.TooLongCharacters(apath.Key(k), v, MaxAnnotationValueLength))
			}
		}
	}
	return errs
}

// validateSelectorBounds checks the sizes of a label selector that
// Kubernetes leaves unbounded and the CRD bounds.
func validateSelectorBounds(ls *metav1.LabelSelector, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if n := len(ls.MatchLabels); n > MaxSelectorTerms {
		errs = append(errs, field.TooMany(path.Child("matchLabels"), n, MaxSelectorTerms))
	}
	epath := path.Child("matchExpressions")
	if n := len(ls.MatchExpressions); n > MaxSelectorTerms {
		errs = append(errs, field.TooMany(epath, n, MaxSelectorTerms))
	}
	for i, req := range ls.MatchExpressions {
		if n := len(req.Values); n > MaxSelectorValues {
			errs = append(errs, field.TooMany(epath.Index(i).Child("values"), n, MaxSelectorValues))
		}
	}
	return errs
}

// The messages of kube-apiserver's ResourceQuota validation.
const (
	msgNotQuotaResource    = "must be a standard resource for quota"
	msgNotResource         = "must be a standard resource type or fully qualified"
	msgNotInteger          = "must be an integer"
	msgUnsupportedScope    = "unsupported scope"
	msgScopeNotForResource = "unsupported scope applied to resource"
	msgConflictingScopes   = "conflicting scopes"
	msgExistsOnly          = "must be 'Exists' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity"
	msgValuesRequired      = "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector"
	msgValuesForbidden     = "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector"
	msgBadOperator         = "not a valid selector operator"
)

// validateQuotaSpec checks spec as kube-apiserver checks a ResourceQuota's
// spec (Kubernetes 1.37).
func validateQuotaSpec(spec *corev1.ResourceQuotaSpec, path *field.Path) field.ErrorList {
	errs := validateResourceList(spec.Hard, path.Child("hard"))
	hard := quota.ResourceNames(spec.Hard)

	if len(spec.Scopes) > 0 {
		spath := path.Child("scopes")
		seen := map[corev1.ResourceQuotaScope]bool{}
		for _, scope := range spec.Scopes {
			if !slices.Contains(knownScopes, scope) {
				errs = append(errs, field.Invalid(spath, spec.Scopes, msgUnsupportedScope))
			}
			for _, name := range hard {
				if isStandardQuotaResource(name) && !scopeAppliesTo(scope, name) {
					errs = append(errs, field.Invalid(spath, spec.Scopes, msgScopeNotForResource))
				}
			}
			seen[scope] = true
		}
		if conflicting(seen) {
			errs = append(errs, field.Invalid(spath, spec.Scopes, msgConflictingScopes))
		}
	}

	if spec.ScopeSelector != nil {
		epath := path.Child("scopeSelector", "matchExpressions")
		seen := map[corev1.ResourceQuotaScope]bool{}
		for _, req := range spec.ScopeSelector.MatchExpressions {
			// Kubernetes reports these at the list's path, not the
			// item's; so does this, to give the same messages.
			if !slices.Contains(knownScopes, req.ScopeName) {
				errs = append(errs, field.Invalid(epath.Child("scopeName"), req.ScopeName, msgUnsupportedScope))
			}
			for _, name := range hard {
				if isStandardQuotaResource(name) && !scopeAppliesTo(req.ScopeName, name) {
					errs = append(errs, field.Invalid(epath, spec.ScopeSelector, msgScopeNotForResource))
				}
			}
			switch req.ScopeName {
			case corev1.ResourceQuotaScopeBestEffort, corev1.ResourceQuotaScopeNotBestEffort,
				corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopeNotTerminating,
				corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
				if req.Operator != corev1.ScopeSelectorOpExists {
					errs = append(errs, field.Invalid(epath.Child("operator"), req.Operator, msgExistsOnly))
				}
			}
			switch req.Operator {
			case corev1.ScopeSelectorOpIn, corev1.ScopeSelectorOpNotIn:
				if len(req.Values) == 0 {
					errs = append(errs, field.Required(epath.Child("values"), msgValuesRequired))
				}
			case corev1.ScopeSelectorOpExists, corev1.ScopeSelectorOpDoesNotExist:
				if len(req.Values) != 0 {
					errs = append(errs, field.Invalid(epath.Child("values"), req.Values, msgValuesForbidden))
				}
			default:
				errs = append(errs, field.Invalid(epath.Child("operator"), req.Operator, msgBadOperator))
			}
			seen[req.ScopeName] = true
		}
		if conflicting(seen) {
			errs = append(errs, field.Invalid(epath, spec.Scopes, msgConflictingScopes))
		}
	}
	return errs
}

// knownScopes are the quota scopes Kubernetes 1.37 accepts in spec.scopes
// and spec.scopeSelector, in the order of its API documentation. The CRD
// lists the same values as its enum (a test keeps the two in step).
var knownScopes = []corev1.ResourceQuotaScope{
	corev1.ResourceQuotaScopeTerminating,
	corev1.ResourceQuotaScopeNotTerminating,
	corev1.ResourceQuotaScopeBestEffort,
	corev1.ResourceQuotaScopeNotBestEffort,
	corev1.ResourceQuotaScopePriorityClass,
	corev1.ResourceQuotaScopeCrossNamespacePodAffinity,
	corev1.ResourceQuotaScopeVolumeAttributesClass,
}

// conflicting reports whether scopes holds both scopes of a pair that no
// object can match at once.
func conflicting(scopes map[corev1.ResourceQuotaScope]bool) bool {
	return scopes[corev1.ResourceQuotaScopeBestEffort] && scopes[corev1.ResourceQuotaScopeNotBestEffort] ||
		scopes[corev1.ResourceQuotaScopeTerminating] && scopes[corev1.ResourceQuotaScopeNotTerminating]
}

// scopeAppliesTo reports whether a quota with scope may limit the standard
// quota resource name: the pod scopes apply to pods and their cpu and
// memory, BestEffort to pods alone (a best-effort pod requests nothing),
// VolumeAttributesClass to claims and their storage.
func scopeAppliesTo(scope corev1.ResourceQuotaScope, name corev1.ResourceName) bool {
	switch scope {
	case corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopeNotTerminating,
		corev1.ResourceQuotaScopeNotBestEffort, corev1.ResourceQuotaScopePriorityClass,
		corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
		switch name {
		case corev1.ResourcePods, corev1.ResourceCPU, corev1.ResourceMemory,
			corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory,
			corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory:
			return true
		}
		return false
	case corev1.ResourceQuotaScopeBestEffort:
		return name == corev1.ResourcePods
	case corev1.ResourceQuotaScopeVolumeAttributesClass:
		return name == corev1.ResourcePersistentVolumeClaims || name == corev1.ResourceRequestsStorage
	}
	return true
}

// validateStatus checks the total and each namespace's entry as a
// ResourceQuota's status, and the bounds.
func validateStatus(s *ClusterQuotaStatus, path *field.Path) field.ErrorList {
	errs := validateQuotaStatus(&s.Total, path.Child("total"))
	npath := path.Child("namespaces")
	if len(s.Namespaces) > MaxNamespaceStatuses {
		errs = append(errs, field.TooMany(npath, len(s.Namespaces), MaxNamespaceStatuses))
	}
	seen := make(map[string]bool, len(s.Namespaces))
	for i := range s.Namespaces {
		e := &s.Namespaces[i]
		ipath := npath.Index(i)
		switch {
		case e.Namespace == "":
			errs = append(errs, field.Required(ipath.Child("namespace"), ""))
		case seen[e.Namespace]:
			errs = append(errs, field.Duplicate(ipath.Child("namespace"), e.Namespace))
		default:
			for _, msg := range validation.IsDNS1123Label(e.Namespace) {
				errs = append(errs, field.Invalid(ipath.Child("namespace"), e.Namespace, msg))
			}
		}
		seen[e.Namespace] = true
		errs = append(errs, validateQuotaStatus(&e.Status, ipath.Child("status"))...)
	}
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(s.NamespacesOmitted), path.Child("namespacesOmitted"))...)
	return errs
}

// validateQuotaStatus checks s as kube-apiserver checks a ResourceQuota's
// status.
func validateQuotaStatus(s *corev1.ResourceQuotaStatus, path *field.Path) field.ErrorList {
	errs := validateResourceList(s.Hard, path.Child("hard"))
	return append(errs, validateResourceList(s.Used, path.Child("used"))...)
}

// validateResourceList checks each name of rl as a quota resource name and
// each quantity as a quota value, in name order, and that rl names at
// most [MaxResources] resources.
func validateResourceList(rl corev1.ResourceList, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(rl) > MaxResources {
		errs = append(errs, field.TooMany(path, len(rl), MaxResources))
	}
	for _, name := range quota.ResourceNames(rl) {
		rpath := path.Key(string(name))
		errs = append(errs, validateQuotaResourceName(name, rpath)...)
		errs = append(errs, validateQuotaValue(name, rl[name], rpath)...)
	}
	return errs
}

// validateQuotaResourceName checks that name is a qualified name, and when
// it has no "/", one of the resources Kubernetes counts in a quota.
func validateQuotaResourceName(name corev1.ResourceName, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(string(name)) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	if strings.Contains(string(name), "/") {
		return errs
	}
	// As in Kubernetes, a name that is no resource at all gets both
	// messages, and a malformed one the second after its syntax errors.
	if len(errs) == 0 && !isStandardResource(name) {
		errs = append(errs, field.Invalid(path, name, msgNotResource))
	}
	if !isStandardQuotaResource(name) {
		errs = append(errs, field.Invalid(path, name, msgNotQuotaResource))
	}
	return errs
}

// validateQuotaValue checks that q is within [MaxQuantity] and not
// negative, and whole when name counts objects or an extended resource.
// A quantity out of range gets that error alone: the other checks would
// take time in proportion to its exponent.
func validateQuotaValue(name corev1.ResourceName, q resource.Quantity, path *field.Path) field.ErrorList {
	if err := validateQuantityRange(q, path); err != nil {
		return field.ErrorList{err}
	}
	var errs field.ErrorList
	if q.Sign() < 0 {
		errs = append(errs, field.Invalid(path, q.String(), apivalidation.IsNegativeErrorMsg))
	}
	if isIntegerResource(name) && q.MilliValue()%1000 != 0 {
		errs = append(errs, field.Invalid(path, q.String(), msgNotInteger))
	}
	return errs
}

// The messages of the quantity bounds.
var (
	msgQuantityTooLarge = "must be less than or equal to " + strconv.FormatInt(MaxQuantity, 10)
	msgQuantityExponent = fmt.Sprintf("must be written with a decimal exponent between -%d and %d", maxQuantityExponent, maxQuantityExponent)
)

// validateQuantityRange checks that q is within the range [MaxQuantity]
// states. It looks at q as an unscaled integer times a power of ten and
// compares, or prints q, only once the exponent is known to be small, so
// that it takes no longer than reading q's digits, whatever the exponent:
// comparing 1e1000000 with anything by resource.Quantity.Cmp builds a
// number of a million digits.
func validateQuantityRange(q resource.Quantity, path *field.Path) *field.Error {
	// AsDec sets the Dec of this copy when q is held as an int64, and
	// returns q's own otherwise: it is only read.
	d := q.AsDec()
	if exp := -int64(d.Scale()); exp < -maxQuantityExponent || exp > maxQuantityExponent {
		if d.Sign() > 0 && exp > 0 {
			return field.Invalid(path, field.OmitValueType{}, msgQuantityTooLarge) // at least 10^301
		}
		return field.Invalid(path, field.OmitValueType{}, msgQuantityExponent)
	}
	if q.CmpInt64(MaxQuantity) > 0 {
		return field.Invalid(path, q.String(), msgQuantityTooLarge)
	}
	return nil
}
