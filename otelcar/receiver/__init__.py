"""The OTLP receiver (``otelcar collect``): gRPC and HTTP endpoints writing into the store.

Transport-free decoding lives in :mod:`otelcar.ingest`; this package adds the network
services, the durable writer and background derivation.
"""

from otelcar.receiver.service import Receiver, ReceiverConfig

__all__ = ["Receiver", "ReceiverConfig"]
