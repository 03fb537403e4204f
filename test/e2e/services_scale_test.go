package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/flotilla-dev/flotilla/test/testbed"
)

// bigSecondaryServices is how many Services the scale spec writes into a secondary.
const bigSecondaryServices = 20000

// The manager caches every Service and EndpointSlice of every secondary (any may be exported): a
// secondary with many Services must not take the leader's memory with it.
var _ = Describe("Services across clusters, at scale", Ordered, Serial, Label("disruptive"), func() {
	const space = "many-services"
	BeforeAll(func(ctx SpecContext) { joinBothSecondaries(ctx) })

	It("caches a secondary's 20,000 Services in bounded memory, and imports one of them exported", func(ctx SpecContext) {
		s2 := bed.Secondaries[1]
		prepareNamespace(ctx, s2, space)
		// The primary's namespaces are its users': Flotilla imports into one, never makes it.
		_, err := bed.Primary.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: space}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			_ = bed.Primary.Clientset.CoreV1().Namespaces().Delete(ctx, space, metav1.DeleteOptions{})
		})
		DeferCleanup(func(ctx SpecContext) {
			_ = clientOf(s2).DeleteAllOf(ctx, &mcsv1beta1.ServiceExport{}, client.InNamespace(space))
			_, err := bed.DeleteStored(ctx, s2, testbed.StoredServices, space)
			Expect(err).NotTo(HaveOccurred())
			// Gone before the next spec: the watches have told everyone.
			Eventually(func(g Gomega) {
				list, err := s2.Clientset.CoreV1().Services(space).List(ctx, metav1.ListOptions{ResourceVersion: "0", Limit: 1})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(list.Items).To(BeEmpty())
			}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
			_ = s2.Clientset.CoreV1().Namespaces().Delete(ctx, space, metav1.DeleteOptions{})
		})
		before := residentMiB(manager.PID())
		name := func(i int) string { return fmt.Sprintf("svc-%05d", i) }
		Expect(bed.StoreServices(ctx, s2, space, bigSecondaryServices, name)).To(Succeed())
		Eventually(func(g Gomega) {
			list, err := s2.Clientset.CoreV1().Services(space).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(list.Items).To(HaveLen(bigSecondaryServices))
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		// The last one written, exported: its import in the primary shows the manager's cache has it.
		last := name(bigSecondaryServices - 1)
		Expect(clientOf(s2).Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: space, Name: last}})).To(Succeed())
		Eventually(func(g Gomega) {
			var imp mcsv1beta1.ServiceImport
			g.Expect(clientOf(bed.Primary).Get(ctx, client.ObjectKey{Namespace: space, Name: last}, &imp)).To(Succeed())
			g.Expect(imp.Spec.Type).To(Equal(mcsv1beta1.Headless))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		after := residentMiB(manager.PID())
		AddReportEntry(fmt.Sprintf("manager resident memory with a secondary of %d Services", bigSecondaryServices),
			fmt.Sprintf("%d MiB, from %d MiB", after, before))
		// Resident memory, not the live heap: it also holds what the 20,000 watch events left for
		// the next GC, and varies with what else the manager holds (alone on the bed: +124 MiB with
		// the caches keeping only what an export reads of a Service that is not Flotilla's, +237 MiB
		// with each cached whole; in the whole suite up to +233 MiB). The bound catches a cache
		// that keeps the Services many times over, or a leak per event.
		Expect(after-before).To(BeNumerically("<", 320), "resident memory grew from %d MiB to %d MiB", before, after)
	}, SpecTimeout(5*time.Minute))
})

// residentMiB is a process's resident memory (VmRSS), in MiB.
func residentMiB(pid int) int {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	for line := range strings.SplitSeq(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kib, err := strconv.Atoi(f[1])
			ExpectWithOffset(1, err).NotTo(HaveOccurred())
			return kib / 1024
		}
	}
	Fail("no VmRSS in /proc/" + strconv.Itoa(pid) + "/status")
	return 0
}
