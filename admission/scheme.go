package admission

import (
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	admissionv1 "k8s.io/api/admission/v1"
	admissionv1beta1 "k8s.io/api/admission/v1beta1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	admissionregistrationv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	networkingv1beta1 "k8s.io/api/networking/v1beta1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	resourcev1beta1 "k8s.io/api/resource/v1beta1"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	storagev1beta1 "k8s.io/api/storage/v1beta1"
	storagemigrationv1beta1 "k8s.io/api/storagemigration/v1beta1"
)

// codecs decodes AdmissionReviews and the objects embedded in their requests
// into the typed objects of k8s.io/api. It is built once, on first use, by
// the first decode, and is read-only afterwards: it is not a registry
// anyone can add to, so no caller can change what another decodes.
var codecs = sync.OnceValue(func() serializer.CodecFactory {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		admissionv1.AddToScheme,
		admissionv1beta1.AddToScheme,
		admissionregistrationv1.AddToScheme,
		admissionregistrationv1beta1.AddToScheme,
		appsv1.AddToScheme,
		authenticationv1.AddToScheme,
		authorizationv1.AddToScheme,
		autoscalingv1.AddToScheme,
		autoscalingv2.AddToScheme,
		batchv1.AddToScheme,
		certificatesv1.AddToScheme,
		certificatesv1beta1.AddToScheme,
		coordinationv1.AddToScheme,
		coordinationv1beta1.AddToScheme,
		corev1.AddToScheme,
		discoveryv1.AddToScheme,
		eventsv1.AddToScheme,
		flowcontrolv1.AddToScheme,
		networkingv1.AddToScheme,
		networkingv1beta1.AddToScheme,
		nodev1.AddToScheme,
		policyv1.AddToScheme,
		rbacv1.AddToScheme,
		resourcev1.AddToScheme,
		resourcev1beta1.AddToScheme,
		resourcev1beta2.AddToScheme,
		schedulingv1.AddToScheme,
		storagev1.AddToScheme,
		storagev1beta1.AddToScheme,
		storagemigrationv1beta1.AddToScheme,
	} {
		if err := add(s); err != nil {
			// Registering k8s.io/api's own types cannot conflict.
			panic("admission: building the scheme: " + err.Error())
		}
	}
	return serializer.NewCodecFactory(s)
})
