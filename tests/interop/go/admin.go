package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// section: one call's answer, or the error franz-go returned for it.
type section struct {
	Result any    `json:"result,omitempty"`
	Error  string `json:"error,omitempty"`
}

func sec(res any, err error) section {
	if err != nil {
		return section{Error: err.Error()}
	}
	return section{Result: res}
}

func errName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if e := kerr.ErrorForCode(code); e != nil {
		if ke, ok := e.(*kerr.Error); ok {
			return ke.Message
		}
		return e.Error()
	}
	return strconv.Itoa(int(code))
}

func str(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

// admin: franz-go's admin answers, each section as the client decoded it. kadm (v1.20) has
// wrappers for groups and configs; it has none for DescribeCluster, DescribeQuorum or the
// features (Admin.describeFeatures is an ApiVersions request), so those go as franz-go's own
// kmsg requests through the same kgo.Client, to the seed broker (a controller serves no
// Metadata, which kgo's routing to "any broker" by node id would need).
func admin(bootstrap string, nodeID int32, topic string, groups []string) (any, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...), kgo.RequestRetries(2),
		kgo.RetryTimeout(5*time.Second))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	seed := cl.SeedBrokers()[0]
	call := func(req kmsg.Request) (kmsg.Response, error) {
		c, cc := context.WithTimeout(ctx, 10*time.Second)
		defer cc()
		r, err := seed.Request(c, req)
		if err != nil && strings.Contains(err.Error(), "connection has died") {
			// a Kafka controller closes the connection on an API its listener does not serve
			// (the group calls above); a request written before franz-go saw that close dies
			// with it. franz-go retries such requests itself, but not one sent to a chosen
			// broker: sent once more, on a new connection.
			r, err = seed.Request(c, req)
		}
		return r, err
	}
	out := map[string]section{}

	// ApiVersions: the features (as Admin.describeFeatures reads them) and the version ranges
	{
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName, req.ClientSoftwareVersion = "goclients", "1"
		r, err := call(req)
		if err == nil {
			resp := r.(*kmsg.ApiVersionsResponse)
			feat := map[string]any{"error": errName(resp.ErrorCode), "finalized_epoch": resp.FinalizedFeaturesEpoch}
			sup, fin := map[string]any{}, map[string]any{}
			for _, f := range resp.SupportedFeatures {
				sup[f.Name] = []int16{f.MinVersion, f.MaxVersion}
			}
			for _, f := range resp.FinalizedFeatures {
				fin[f.Name] = []int16{f.MinVersionLevel, f.MaxVersionLevel}
			}
			feat["supported"], feat["finalized"] = sup, fin
			out["describe_features"] = sec(feat, nil)
			vers := map[string][]int16{}
			for _, k := range resp.ApiKeys {
				vers[kmsg.NameForKey(k.ApiKey)] = []int16{k.MinVersion, k.MaxVersion}
			}
			out["api_versions"] = sec(vers, nil)
		} else {
			out["describe_features"] = sec(nil, err)
		}
	}

	// DescribeCluster as a controller-bootstrapped client sends it (EndpointType 2)
	{
		req := kmsg.NewPtrDescribeClusterRequest()
		req.EndpointType = 2
		r, err := call(req)
		if err == nil {
			resp := r.(*kmsg.DescribeClusterResponse)
			brokers := []map[string]any{}
			for _, b := range resp.Brokers {
				brokers = append(brokers, map[string]any{"node_id": b.NodeID, "host": b.Host, "port": b.Port,
					"rack": str(b.Rack), "is_fenced": b.IsFenced})
			}
			sort.Slice(brokers, func(i, j int) bool { return brokers[i]["node_id"].(int32) < brokers[j]["node_id"].(int32) })
			out["describe_cluster"] = sec(map[string]any{"version": req.Version, "error": errName(resp.ErrorCode),
				"error_message": str(resp.ErrorMessage), "endpoint_type": resp.EndpointType,
				"cluster_id": resp.ClusterID, "controller_id": resp.ControllerID, "brokers": brokers,
				"cluster_authorized_operations": resp.ClusterAuthorizedOperations}, nil)
		} else {
			out["describe_cluster"] = sec(nil, err)
		}
	}

	// DescribeQuorum of __cluster_metadata-0
	{
		req := kmsg.NewPtrDescribeQuorumRequest()
		t := kmsg.NewDescribeQuorumRequestTopic()
		t.Topic = "__cluster_metadata"
		p := kmsg.NewDescribeQuorumRequestTopicPartition()
		t.Partitions = append(t.Partitions, p)
		req.Topics = append(req.Topics, t)
		r, err := call(req)
		if err == nil {
			resp := r.(*kmsg.DescribeQuorumResponse)
			res := map[string]any{"version": req.Version, "error": errName(resp.ErrorCode),
				"error_message": str(resp.ErrorMessage)}
			replicas := func(rs []kmsg.DescribeQuorumResponseTopicPartitionReplicaState) []map[string]any {
				l := []map[string]any{}
				for _, s := range rs {
					l = append(l, map[string]any{"replica_id": s.ReplicaID,
						"replica_directory_id": fmt.Sprintf("%x", s.ReplicaDirectoryID),
						"log_end_offset":       s.LogEndOffset, "last_fetch_timestamp": s.LastFetchTimestamp,
						"last_caught_up_timestamp": s.LastCaughtUpTimestamp})
				}
				return l
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					res["topic"], res["partition"] = t.Topic, p.Partition
					res["partition_error"], res["partition_error_message"] = errName(p.ErrorCode), str(p.ErrorMessage)
					res["leader_id"], res["leader_epoch"], res["high_watermark"] = p.LeaderID, p.LeaderEpoch, p.HighWatermark
					res["current_voters"], res["observers"] = replicas(p.CurrentVoters), replicas(p.Observers)
				}
			}
			nodes := []map[string]any{}
			for _, n := range resp.Nodes {
				ls := []map[string]any{}
				for _, l := range n.Listeners {
					ls = append(ls, map[string]any{"name": l.Name, "host": l.Host, "port": l.Port})
				}
				nodes = append(nodes, map[string]any{"node_id": n.NodeID, "listeners": ls})
			}
			res["nodes"] = nodes
			out["describe_quorum"] = sec(res, nil)
		} else {
			out["describe_quorum"] = sec(nil, err)
		}
	}

	// kadm: groups
	{
		c, cc := context.WithTimeout(ctx, 15*time.Second)
		lg, err := adm.ListGroups(c)
		cc()
		if err == nil {
			l := []map[string]any{}
			for _, g := range lg.Sorted() {
				l = append(l, map[string]any{"group": g.Group, "coordinator": g.Coordinator, "group_type": g.GroupType,
					"protocol_type": g.ProtocolType, "state": g.State})
			}
			out["list_groups"] = sec(l, nil)
		} else {
			out["list_groups"] = sec(nil, err)
		}
	}
	if len(groups) > 0 {
		c, cc := context.WithTimeout(ctx, 15*time.Second)
		dg, err := adm.DescribeGroups(c, groups...)
		cc()
		if err == nil {
			l := []map[string]any{}
			for _, g := range dg.Sorted() {
				ms := []map[string]any{}
				for _, m := range g.Members {
					ms = append(ms, map[string]any{"member_id": m.MemberID, "instance_id": str(m.InstanceID),
						"client_id": m.ClientID, "client_host": m.ClientHost})
				}
				e := ""
				if g.Err != nil {
					e = g.Err.Error()
				}
				l = append(l, map[string]any{"group": g.Group, "coordinator": g.Coordinator.NodeID,
					"state": g.State, "protocol_type": g.ProtocolType, "protocol": g.Protocol, "members": ms,
					"error": e})
			}
			out["describe_groups"] = sec(l, nil)
		} else {
			out["describe_groups"] = sec(nil, err)
		}
		c, cc = context.WithTimeout(ctx, 15*time.Second)
		offs, err := adm.FetchOffsets(c, groups[0])
		cc()
		if err == nil {
			l := []map[string]any{}
			offs.Each(func(o kadm.OffsetResponse) {
				l = append(l, map[string]any{"topic": o.Topic, "partition": o.Partition, "offset": o.At,
					"leader_epoch": o.LeaderEpoch, "metadata": o.Metadata})
			})
			out["fetch_offsets"] = sec(l, nil)
		} else {
			out["fetch_offsets"] = sec(nil, err)
		}
	}

	// configs: the node itself and the topic; through kadm (its routing: Metadata for a broker
	// resource) and as one request to the seed
	configs := func(rcs []kmsg.DescribeConfigsResponseResource) []map[string]any {
		l := []map[string]any{}
		for _, r := range rcs {
			cs := map[string]any{}
			for _, c := range r.Configs {
				syn := []map[string]any{}
				for _, s := range c.ConfigSynonyms {
					syn = append(syn, map[string]any{"name": s.Name, "value": str(s.Value), "source": s.Source.String()})
				}
				cs[c.Name] = map[string]any{"value": str(c.Value), "read_only": c.ReadOnly,
					"source": c.Source.String(), "sensitive": c.IsSensitive, "type": c.ConfigType.String(),
					"synonyms": syn}
			}
			l = append(l, map[string]any{"resource_type": r.ResourceType.String(), "resource_name": r.ResourceName,
				"error": errName(r.ErrorCode), "error_message": str(r.ErrorMessage), "configs": cs})
		}
		return l
	}
	for _, rs := range []struct {
		name string
		typ  kmsg.ConfigResourceType
		res  string
	}{{"describe_broker_configs", kmsg.ConfigResourceTypeBroker, strconv.Itoa(int(nodeID))},
		{"describe_topic_configs", kmsg.ConfigResourceTypeTopic, topic}} {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.IncludeSynonyms = true
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = rs.typ, rs.res
		req.Resources = append(req.Resources, rr)
		r, err := call(req)
		if err == nil {
			out[rs.name] = sec(configs(r.(*kmsg.DescribeConfigsResponse).Resources), nil)
		} else {
			out[rs.name] = sec(nil, err)
		}
	}
	{
		c, cc := context.WithTimeout(ctx, 15*time.Second)
		rc, err := adm.DescribeBrokerConfigs(c, nodeID)
		cc()
		if err == nil {
			l := []map[string]any{}
			for _, r := range rc {
				e := ""
				if r.Err != nil {
					e = r.Err.Error()
				}
				l = append(l, map[string]any{"name": r.Name, "error": e, "configs": len(r.Configs)})
			}
			out["kadm_describe_broker_configs"] = sec(l, nil)
		} else {
			out["kadm_describe_broker_configs"] = sec(nil, err)
		}
	}
	return out, nil
}
