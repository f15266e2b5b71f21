package org.opensearch.transport.grpc.spi;

/**
 * Stand-in for the extension point of the transport-grpc module, which Maven Central does not serve.
 * The k-NN plugin 3.x registers a gRPC query converter under this interface (META-INF/services); the
 * embedded node, which has no gRPC transport, only needs the interface to exist to load the plugin.
 * Nothing calls it: esmem talks REST.
 */
public interface QueryBuilderProtoConverter {
}
