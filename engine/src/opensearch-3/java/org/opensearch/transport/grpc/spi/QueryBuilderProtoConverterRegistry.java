package org.opensearch.transport.grpc.spi;

/** Stand-in for transport-grpc's converter registry (see QueryBuilderProtoConverter): named, never called. */
public interface QueryBuilderProtoConverterRegistry {
}
