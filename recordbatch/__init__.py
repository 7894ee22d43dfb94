"""recordbatch: Kafka v2 record batches as Kafka stores and replicates them.

A standalone package (it never imports ``kraftnode``): records and batches,
CRC-32C, gzip/snappy/lz4/zstd with bounded decompression, control records, and
zero-copy batch views for the replication path.  See ``docs/recordbatch.md``.
"""

from __future__ import annotations

from recordbatch.builder import build_batch, codec_id
from recordbatch.compression import DEFAULT_MAX_DECOMPRESSED_BYTES, compress, decompress
from recordbatch.control import (
    ControlType,
    EndTransactionMarker,
    KRaftControlMessage,
    build_control_batch,
    build_kraft_control_batch,
    control_key,
    decode_control_record,
    end_txn_marker_batch,
    kraft_version_batch,
    leader_change_batch,
    parse_control_key,
    snapshot_footer_batch,
    snapshot_header_batch,
    voters_batch,
)
from recordbatch.errors import CorruptBatchError, DecompressionLimitError
from recordbatch.layout import (
    CODEC_NAMES,
    CREATE_TIME,
    HEADER_SIZE,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
)
from recordbatch.record import Header, Record, RecordView
from recordbatch.view import (
    BatchIterator,
    BatchView,
    assign_offsets,
    iter_batches,
    set_base_offset_and_epoch,
)

__all__ = [
    "BatchIterator",
    "BatchView",
    "CODEC_NAMES",
    "CREATE_TIME",
    "ControlType",
    "EndTransactionMarker",
    "KRaftControlMessage",
    "CorruptBatchError",
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
    "DecompressionLimitError",
    "HEADER_SIZE",
    "Header",
    "LOG_APPEND_TIME",
    "LOG_OVERHEAD",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "Record",
    "RecordView",
    "assign_offsets",
    "build_batch",
    "build_control_batch",
    "build_kraft_control_batch",
    "control_key",
    "decode_control_record",
    "end_txn_marker_batch",
    "kraft_version_batch",
    "leader_change_batch",
    "parse_control_key",
    "snapshot_footer_batch",
    "snapshot_header_batch",
    "voters_batch",
    "codec_id",
    "compress",
    "decompress",
    "iter_batches",
    "set_base_offset_and_epoch",
]
