// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package workloop_test

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/lib/workloop"
)

func Example() {
	// The zero Logger discards the failed try's log line; a controller's ctx
	// carries its own logger.
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Logger{}))
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "example"})
	queue.Add("default/data")

	tries := 0
	err := workloop.Run(ctx, queue, workloop.Config[string]{
		Workers: 2,
		Sync: func(_ context.Context, key string) error {
			tries++ // the queue never syncs one key in two workers at once
			if tries == 1 {
				return errors.New("backend busy") // logged and retried after a backoff
			}
			fmt.Printf("synced %s after %d tries\n", key, tries)
			cancel() // stop the example; a controller runs until it is told to stop
			return nil
		},
		ErrorMessage:  "Resize failed, will retry",
		KeysAndValues: func(key string) []any { return []any{"claim", key} },
	})
	fmt.Println("stopped:", err, queue.ShuttingDown())
	// Output:
	// synced default/data after 2 tries
	// stopped: <nil> true
}
