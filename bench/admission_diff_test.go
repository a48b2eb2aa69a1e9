package bench

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/quotakit/quotakit/internal/qcmp"
)

// TestAdmissionEnginesAgree sends the same pod creations, one at a time, to
// kube-apiserver's admission evaluator and to quotakit's, each over its own
// simulated API, and compares every answer and the stored usage.
func TestAdmissionEnginesAgree(t *testing.T) {
	cpus := []string{"100m", "400m", "600m", "300m", "1", "100m", "50m", "250m"}
	run := func(start func(*simQuotas) (admitFunc, func())) ([]string, corev1.ResourceList) {
		s := newSimQuotas(1, 1, 0)
		q := s.byNS["ns-0"][0]
		q.Spec.Hard = rl("pods", "5", "requests.cpu", "1")
		q.Status.Hard = q.Spec.Hard
		admit, stop := start(s)
		defer stop()
		var answers []string
		for i, cpu := range cpus {
			pod := "p" + string(rune('a'+i))
			err := admit(context.Background(), admissionPod(pod, "ns-0", cpu))
			if err != nil {
				answers = append(answers, err.Error())
			} else {
				answers = append(answers, "admitted")
			}
		}
		return answers, s.get("ns-0")[0].Status.Used
	}
	wantAnswers, wantUsed := run(upstreamEngine)
	gotAnswers, gotUsed := run(oursEngine)
	if diff := cmp.Diff(wantAnswers, gotAnswers); diff != "" {
		t.Errorf("answers (-kube-apiserver +quotakit):\n%s", diff)
	}
	if diff := cmp.Diff(wantUsed, gotUsed, qcmp.Quantities()); diff != "" {
		t.Errorf("stored status.used (-kube-apiserver +quotakit):\n%s", diff)
	}
	denied := 0
	for _, a := range wantAnswers {
		if a != "admitted" {
			denied++
		}
	}
	if denied == 0 || denied == len(cpus) {
		t.Errorf("%d of %d denied; the sequence should exercise both answers", denied, len(cpus))
	}
}
