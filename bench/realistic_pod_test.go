package bench

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apitypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// realisticPod returns pod i of a population shaped like what a decoder
// produces from a 1.37 apiserver for a Deployment's running pod: five
// labels, five annotations, a ReplicaSet owner, the projected
// service-account volume, the two default tolerations, two containers (the
// app with a memory limit and a liveness probe), and a status with five conditions and two container statuses.
// Every string and map is its own allocation, as after decoding. It takes
// about 9.3 KB of heap (TestRealisticPodSize), the size issue #11 measured
// pods at. Pods spread over 100 namespaces, 50 apps and 500 nodes.
func realisticPod(i int) *corev1.Pod { return realisticPodIn(i, 100) }

// realisticPodIn is realisticPod(i) with the pods spread over namespaces
// namespaces.
func realisticPodIn(i, namespaces int) *corev1.Pod {
	s := strings.Clone
	app := fmt.Sprintf("app-%d", i%50)
	hash := fmt.Sprintf("%x", 0x5d8f7c6b9+i%50)
	ns := fmt.Sprintf("ns-%03d", i%namespaces)
	name := fmt.Sprintf("%s-%s-%05x", app, hash, i)
	apiVolume := fmt.Sprintf("kube-api-access-%05x", i)
	created := metav1.NewTime(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second))
	container := func(cname, image string, port int32, cpu, mem string, limited bool) corev1.Container {
		c := corev1.Container{
			Name:  s(cname),
			Image: s(image),
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
			},
			VolumeMounts:             []corev1.VolumeMount{{Name: s(apiVolume), ReadOnly: true, MountPath: s("/var/run/secrets/kubernetes.io/serviceaccount")}},
			TerminationMessagePath:   s("/dev/termination-log"),
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			ImagePullPolicy:          corev1.PullIfNotPresent,
		}
		if limited {
			c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(mem)}
			c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: s("/healthz"), Port: intstr.FromInt32(port), Scheme: corev1.URISchemeHTTP}}, TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}
		}
		return c
	}
	status := func(cname, image string, n int) corev1.ContainerStatus {
		return corev1.ContainerStatus{
			Name:        s(cname),
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: created}},
			Ready:       true,
			Image:       s(image),
			ImageID:     fmt.Sprintf("%s@sha256:%064x", image, n),
			ContainerID: fmt.Sprintf("containerd://%064x", i*2+n),
			Started:     ptr.To(true),
		}
	}
	var conditions []corev1.PodCondition
	for _, t := range []corev1.PodConditionType{"PodReadyToStartContainers", corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
		conditions = append(conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: created})
	}
	podIP := fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
	hostIP := fmt.Sprintf("192.168.%d.%d", i%500/250, i%250)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			GenerateName:      fmt.Sprintf("%s-%s-", app, hash),
			Namespace:         ns,
			UID:               apitypes.UID(fmt.Sprintf("%08x-1c2d-4e5f-8a9b-%012x", i, i*7919)),
			ResourceVersion:   fmt.Sprint(1000 + i),
			CreationTimestamp: created,
			Labels: map[string]string{
				"app": s(app), "pod-template-hash": s(hash), "tier": s("web"),
				"version": s("v1.42.0"), "team": fmt.Sprintf("team-%d", i%7),
			},
			Annotations: map[string]string{
				"kubectl.kubernetes.io/restartedAt": s("2026-10-30T09:12:44Z"),
				"prometheus.io/scrape":              s("true"),
				"prometheus.io/port":                s("9090"),
				"cni.projectcalico.org/podIP":       podIP + "/32",
				"cni.projectcalico.org/containerID": fmt.Sprintf("%064x", i),
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: s("apps/v1"), Kind: s("ReplicaSet"), Name: fmt.Sprintf("%s-%s", app, hash),
				UID: apitypes.UID(fmt.Sprintf("%08x-aaaa-4bbb-8ccc-%012x", i%50, i%50)), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{{
				Name: apiVolume,
				VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
					Sources: []corev1.VolumeProjection{
						{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To[int64](3607), Path: s("token")}},
						{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: s("kube-root-ca.crt")}, Items: []corev1.KeyToPath{{Key: s("ca.crt"), Path: s("ca.crt")}}}},
						{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: s("namespace"), FieldRef: &corev1.ObjectFieldSelector{APIVersion: s("v1"), FieldPath: s("metadata.namespace")}}}}},
					},
					DefaultMode: ptr.To[int32](420),
				}},
			}},
			Containers: []corev1.Container{
				container("app", "registry.example/shop/app:v1.42.0", 8080, "250m", "256Mi", true),
				container("proxy", "registry.example/mesh/proxy:1.24.3", 15001, "50m", "64Mi", false),
			},
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			DNSPolicy:                     corev1.DNSClusterFirst,
			ServiceAccountName:            s("default"),
			NodeName:                      fmt.Sprintf("node-%d", i%500),
			SecurityContext:               &corev1.PodSecurityContext{},
			SchedulerName:                 s("default-scheduler"),
			Tolerations: []corev1.Toleration{
				{Key: s("node.kubernetes.io/not-ready"), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
				{Key: s("node.kubernetes.io/unreachable"), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
			},
			Priority:           ptr.To[int32](0),
			EnableServiceLinks: ptr.To(true),
			PreemptionPolicy:   ptr.To(corev1.PreemptLowerPriority),
		},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: conditions,
			HostIP:     hostIP,
			HostIPs:    []corev1.HostIP{{IP: s(hostIP)}},
			PodIP:      podIP,
			PodIPs:     []corev1.PodIP{{IP: s(podIP)}},
			StartTime:  &created,
			ContainerStatuses: []corev1.ContainerStatus{
				status("app", "registry.example/shop/app:v1.42.0", 1),
				status("proxy", "registry.example/mesh/proxy:1.24.3", 2),
			},
			QOSClass: corev1.PodQOSBurstable,
		},
	}
}

// TestRealisticPodSize checks that realisticPod stays about the size the
// informer figures in BENCHMARKS.md are quoted for. The heap is shared with
// whatever earlier tests of the package left winding down (an upstream
// controller's workers still releasing their caches), so one reading can
// be off by megabytes; the median of five is not.
func TestRealisticPodSize(t *testing.T) {
	const n, rounds = 2000, 5
	per := make([]float64, rounds)
	for r := range per {
		pods := make([]*corev1.Pod, n)
		before := liveHeap()
		for i := range pods {
			pods[i] = realisticPod(i)
		}
		after := liveHeap()
		runtime.KeepAlive(pods)
		per[r] = (float64(after) - float64(before)) / n
	}
	t.Logf("realisticPod: bytes of heap each, %d rounds: %.0f", rounds, per)
	slices.Sort(per)
	if m := per[rounds/2]; m < 8800 || m > 9800 {
		t.Errorf("realisticPod takes %.0f bytes (median), want about 9.3 KB", m)
	}
}
