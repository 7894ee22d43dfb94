"""The KRaft controller's rules, sans I/O: what Kafka 3.9's QuorumController and its managers
decide, as functions of the metadata image, a request and the time.

Modules, one concern each (Kafka's names where they help):

* :mod:`~kraftnode.controller.quorum_controller` -- :class:`QuorumController`, the entry point:
  one method per controller operation and the periodic duties; :mod:`~kraftnode.controller.context`
  -- what the managers share (configuration, view, broker sessions);
* :mod:`~kraftnode.controller.view` -- :class:`ControllerView`, the image at the end of the
  active controller's log, with the indexes the managers use;
* :mod:`~kraftnode.controller.cluster` -- broker registration, heartbeats, fencing
  (ClusterControlManager); :mod:`~kraftnode.controller.heartbeats` -- broker sessions
  (BrokerHeartbeatManager);
* :mod:`~kraftnode.controller.replication` -- topics, partitions, leaders, ISRs, reassignments
  (ReplicationControlManager); :mod:`~kraftnode.controller.partition_change` --
  PartitionChangeBuilder; :mod:`~kraftnode.controller.placement` -- StripedReplicaPlacer;
* :mod:`~kraftnode.controller.configs` and :mod:`~kraftnode.controller.topic_configs` --
  dynamic configs and their validation (ConfigurationControlManager, LogConfig);
* :mod:`~kraftnode.controller.producer_ids` -- producer id blocks; :mod:`~kraftnode.controller.quotas`
  -- client quotas;
* :mod:`~kraftnode.controller.result`, :mod:`~kraftnode.controller.errors`,
  :mod:`~kraftnode.controller.versions` -- ControllerResult, ApiError, MetadataVersion;
* :mod:`~kraftnode.controller.feature_control` -- UpdateFeatures (FeatureControlManager).

The I/O shell that runs this on the raft leader is ``kraftnode/server/controller_io/controller_shell.py``;
docs/controller.md describes what is served.
"""

from kraftnode.controller.context import ControllerConfig
from kraftnode.controller.errors import ApiError
from kraftnode.controller.quorum_controller import QuorumController
from kraftnode.controller.result import ControllerResult
from kraftnode.controller.view import ControllerView

__all__ = ["ApiError", "ControllerConfig", "ControllerResult", "ControllerView", "QuorumController"]
