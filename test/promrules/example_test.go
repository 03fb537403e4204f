package promrules_test

import (
	"context"
	"fmt"
	"time"

	"github.com/flotilla-dev/flotilla/test/promrules"
)

// Which of the chart's alerts one scrape of the manager makes fire once it has held for 6 minutes.
func ExampleEvalScrape() {
	ctx := context.TODO() //nolint:forbidigo // an example has no caller's context
	alerts, err := promrules.EvalScrape(ctx, "rendered-chart.yaml", "scrape.txt", 6*time.Minute)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, a := range alerts {
		if a.Firing() {
			fmt.Println(a.Name, a.Labels["member_cluster"])
		}
	}
}
