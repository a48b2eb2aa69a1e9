package admission_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/admission"
)

// BenchmarkHandler measures the reviews a Handler answers, each a pod
// creation. handler/ calls ServeHTTP with pods ignored by the Evaluator:
// the Handler's own work (reading, decoding, answering) without a
// hand-off to the Evaluator's goroutines, whose scheduling would drown it.
// charged/ calls ServeHTTP with each pod checked against a quota with
// room, charged and written (one write serves a batch) in an in-memory
// store. loopback/ sends the charged reviews over HTTP on the loopback
// interface from parallel clients, with the server's per-request work (a
// read deadline set and lifted) included. The large pod's review (about
// 22 KiB) is read through more than one buffer.
func BenchmarkHandler(b *testing.B) {
	large := strings.Replace(webPod, `"spec":{`, `"spec":{"nodeSelector":{`+envLabels(400)+`},`, 1)
	for _, bb := range []struct {
		name     string
		pod      string
		ignored  bool
		loopback bool
	}{
		{name: "handler/small", pod: webPod, ignored: true},
		{name: "handler/large", pod: large, ignored: true},
		{name: "charged/small", pod: webPod},
		{name: "loopback/small", pod: webPod, loopback: true},
	} {
		b.Run(bb.name, func(b *testing.B) {
			s := newStore(rq("ns", "compute", rl("pods", "1000000000", "requests.cpu", "1000000000"), rl("pods", "0", "requests.cpu", "0")))
			var opts admission.Options
			if bb.ignored {
				opts.IgnoredResources = map[schema.GroupResource]struct{}{{Resource: "pods"}: {}}
			}
			e, err := admission.NewEvaluator(s, opts)
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(b.Context())
			stopped := make(chan struct{})
			go func() { defer close(stopped); _ = e.Run(ctx) }()
			defer func() { cancel(); <-stopped }()
			h := &admission.Handler{Evaluator: e}
			body := []byte(review("1", bb.pod, false))
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			if !bb.loopback {
				for b.Loop() {
					req := httptest.NewRequest(http.MethodPost, "/validate", bytes.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, req)
					if rec.Code != http.StatusOK || !bytes.Contains(rec.Body.Bytes(), []byte(`"allowed":true`)) {
						b.Fatalf("answer %d %s", rec.Code, rec.Body)
					}
				}
				return
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			client := srv.Client()
			client.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
			var failed atomic.Value
			b.SetParallelism(4)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := client.Post(srv.URL, "application/json", bytes.NewReader(body))
					if err != nil {
						failed.Store(err)
						return
					}
					out, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK || !bytes.Contains(out, []byte(`"allowed":true`)) {
						failed.Store(fmt.Errorf("answer %d %s", resp.StatusCode, out))
						return
					}
				}
			})
			if err := failed.Load(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// envLabels returns n node selector entries, as JSON object members.
func envLabels(n int) string {
	var sb strings.Builder
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `"example.com/label-%04d":"value-%04d-%s"`, i, i, strings.Repeat("x", 16))
	}
	return sb.String()
}
