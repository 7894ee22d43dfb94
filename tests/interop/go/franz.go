package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type produced struct {
	Offsets []int64 `json:"offsets"`
}

// produce writes N values PREFIX-0..PREFIX-(N-1), acks=all (franz-go's default producer is
// idempotent), one ProduceSync of all of them; the offsets in order.
func produce(bootstrap, topic, prefix string, n int) (any, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.AllowAutoTopicCreation())
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Value: []byte(fmt.Sprintf("%s-%d", prefix, i)), Partition: 0}
	}
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		return nil, err
	}
	out := produced{}
	for _, r := range res {
		out.Offsets = append(out.Offsets, r.Record.Offset)
	}
	return out, nil
}

type consumed struct {
	Values []string `json:"values"`
	// what the group coordinator says of the group while this member is in it
	// (ListGroups v5's GroupType: "classic" or "consumer")
	GroupType  string `json:"group_type"`
	GroupState string `json:"group_state"`
	Committed  int64  `json:"committed"`
	TimedOut   bool   `json:"timed_out"`
}

// franzConsume joins GROUP (the classic protocol, or KIP-848's with ServerSideBalancer when
// protocol is "consumer"), polls until N values starting with PREFIX came or the timeout,
// commits what it polled (CommitUncommittedOffsets) and leaves.
func franzConsume(bootstrap, topic, group, prefix string, n, timeoutMs int, protocol string) (any, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(strings.Split(bootstrap, ",")...), kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.SessionTimeout(6 * time.Second), kgo.HeartbeatInterval(500 * time.Millisecond)}
	switch protocol {
	case "classic":
	case "consumer":
		// franz-go runs KIP-848 only when asked and only when the coordinator serves
		// ConsumerGroupHeartbeat v1 (kgo.Client.supportsKIP848v1); else it falls back to classic
		opts = append(opts, kgo.ServerSideBalancer())
	default:
		return nil, fmt.Errorf("protocol %q: classic or consumer", protocol)
	}
	if os.Getenv("GOCLIENTS_DEBUG") != "" {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug, nil)))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	out := consumed{Values: []string{}}
	deadline := time.Now().Add(time.Duration(timeoutMs) * time.Millisecond)
	for len(out.Values) < n {
		left := time.Until(deadline)
		if left <= 0 {
			out.TimedOut = true
			break
		}
		ctx, cancel := context.WithTimeout(context.Background(), min(left, time.Second))
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachError(func(t string, p int32, err error) {
			if err != context.DeadlineExceeded {
				fmt.Fprintf(os.Stderr, "fetch error %s[%d]: %v\n", t, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			if v := string(r.Value); strings.HasPrefix(v, prefix) {
				out.Values = append(out.Values, v)
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	if lg, err := adm.ListGroups(ctx); err == nil {
		out.GroupType, out.GroupState = lg[group].GroupType, lg[group].State
	} else {
		fmt.Fprintln(os.Stderr, "ListGroups:", err)
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	if off, ok := cl.CommittedOffsets()[topic][0]; ok {
		out.Committed = off.Offset
	}
	cl.LeaveGroup()
	return out, nil
}
