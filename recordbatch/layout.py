"""Byte layout of a v2 (magic 2) RecordBatch header, as in Kafka's DefaultRecordBatch.

::

    offset  size  field
         0     8  baseOffset            int64   (not covered by the CRC)
         8     4  batchLength           int32   bytes after this field
        12     4  partitionLeaderEpoch  int32   (not covered by the CRC)
        16     1  magic                 int8    always 2 here
        17     4  crc                   uint32  CRC-32C of bytes [21, end)
        21     2  attributes            int16
        23     4  lastOffsetDelta       int32
        27     8  baseTimestamp         int64
        35     8  maxTimestamp          int64
        43     8  producerId            int64
        51     2  producerEpoch         int16
        53     4  baseSequence          int32
        57     4  recordsCount          int32
        61        records (compressed as one stream when a codec is set)

The offsets are constants so that views can read a single field with one
``Struct.unpack_from`` on a memoryview, without copying or decoding anything else.
"""

from __future__ import annotations

import struct
from typing import Final

# Whole header, used by the builder (pack) and by decoders that want every field.
HEADER: Final = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE: Final = HEADER.size  # 61
# The CRC covers attributes..end; this is the header part after the CRC, packed by the builder.
CRC_COVERED_HEADER: Final = struct.Struct(">hiqqqhii")

LOG_OVERHEAD: Final = 12  # baseOffset + batchLength: what precedes batchLength's count
MIN_BATCH_LENGTH: Final = HEADER_SIZE - LOG_OVERHEAD  # 49: a header with zero records
HEADER_SIZE_UP_TO_MAGIC: Final = 17  # enough bytes to know which format follows

BASE_OFFSET_OFFSET: Final = 0
LENGTH_OFFSET: Final = 8
PARTITION_LEADER_EPOCH_OFFSET: Final = 12
MAGIC_OFFSET: Final = 16
CRC_OFFSET: Final = 17
ATTRIBUTES_OFFSET: Final = 21
LAST_OFFSET_DELTA_OFFSET: Final = 23
BASE_TIMESTAMP_OFFSET: Final = 27
MAX_TIMESTAMP_OFFSET: Final = 35
PRODUCER_ID_OFFSET: Final = 43
PRODUCER_EPOCH_OFFSET: Final = 51
BASE_SEQUENCE_OFFSET: Final = 53
RECORDS_COUNT_OFFSET: Final = 57
RECORDS_OFFSET: Final = 61

CURRENT_MAGIC: Final = 2

# Attribute bits.
COMPRESSION_MASK: Final = 0x07
TIMESTAMP_TYPE_MASK: Final = 0x08
TRANSACTIONAL_MASK: Final = 0x10
CONTROL_MASK: Final = 0x20
DELETE_HORIZON_MASK: Final = 0x40

CREATE_TIME: Final = 0
LOG_APPEND_TIME: Final = 1

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
NO_PARTITION_LEADER_EPOCH: Final = -1

# Compression codec ids (attributes & 0x07), in Kafka's numbering.
CODEC_NONE: Final = 0
CODEC_GZIP: Final = 1
CODEC_SNAPPY: Final = 2
CODEC_LZ4: Final = 3
CODEC_ZSTD: Final = 4
CODEC_NAMES: Final = ("none", "gzip", "snappy", "lz4", "zstd")
CODEC_IDS: Final = {name: i for i, name in enumerate(CODEC_NAMES)}
