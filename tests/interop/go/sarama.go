package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

type saramaHandler struct {
	prefix string
	n      int
	mu     sync.Mutex
	values []string
	done   func()
	errs   []string
}

func (h *saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for {
		select {
		case m, ok := <-c.Messages():
			if !ok {
				return nil
			}
			s.MarkMessage(m, "")
			h.mu.Lock()
			if v := string(m.Value); strings.HasPrefix(v, h.prefix) {
				h.values = append(h.values, v)
			}
			full := len(h.values) >= h.n
			h.mu.Unlock()
			if full {
				s.Commit() // synchronous: OffsetCommit of what was marked
				h.done()
				return nil
			}
		case <-s.Context().Done():
			return nil
		}
	}
}

// saramaConsume: a sarama ConsumerGroup (classic protocol, the range assignor, manual
// commits) reads GROUP's partitions until N values starting with PREFIX or the timeout,
// commits what it marked, and closes (LeaveGroup).
func saramaConsume(bootstrap, topic, group, prefix string, n, timeoutMs int) (any, error) {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_9_0_0
	cfg.ClientID = "goclients-sarama"
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Group.Session.Timeout = 6 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	cfg.Consumer.Return.Errors = true
	if os.Getenv("GOCLIENTS_DEBUG") != "" {
		sarama.Logger = saramaLogger{}
	}
	cg, err := sarama.NewConsumerGroup(strings.Split(bootstrap, ","), group, cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(timeoutMs)*time.Millisecond)
	defer cancel()
	h := &saramaHandler{prefix: prefix, n: n, done: cancel, values: []string{}}
	go func() {
		for e := range cg.Errors() {
			fmt.Fprintln(os.Stderr, "sarama:", e)
		}
	}()
	for ctx.Err() == nil {
		if err := cg.Consume(ctx, []string{topic}, h); err != nil && !errors.Is(err, context.Canceled) &&
			!errors.Is(err, context.DeadlineExceeded) {
			fmt.Fprintln(os.Stderr, "Consume:", err)
			time.Sleep(200 * time.Millisecond)
		}
	}
	timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded)
	if err := cg.Close(); err != nil {
		return nil, fmt.Errorf("close: %w", err)
	}
	// the offset the group committed, read back through a fresh client
	committed := int64(-1)
	if cl, err := sarama.NewClient(strings.Split(bootstrap, ","), cfg); err == nil {
		if om, err := sarama.NewOffsetManagerFromClient(group, cl); err == nil {
			if pom, err := om.ManagePartition(topic, 0); err == nil {
				committed, _ = pom.NextOffset()
				pom.AsyncClose()
			}
			om.Close()
		}
		cl.Close()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return consumed{Values: h.values, Committed: committed, TimedOut: timedOut}, nil
}

type saramaLogger struct{}

func (saramaLogger) Print(v ...any)                 { fmt.Fprint(os.Stderr, v...) }
func (saramaLogger) Printf(format string, v ...any) { fmt.Fprintf(os.Stderr, format, v...) }
func (saramaLogger) Println(v ...any)               { fmt.Fprintln(os.Stderr, v...) }
