package dev.esmem.engine;

import java.util.Arrays;
import java.util.List;

import org.opensearch.analysis.common.CommonAnalysisPlugin;
import org.opensearch.env.Environment;
import org.opensearch.index.mapper.MapperExtrasPlugin;
import org.opensearch.index.reindex.ReindexPlugin;
import org.opensearch.node.Node;
import org.opensearch.painless.PainlessPlugin;
import org.opensearch.plugins.Plugin;
import org.opensearch.script.mustache.MustachePlugin;
import org.opensearch.transport.Netty4Plugin;

/** OpenSearch 2.x: Node's protected constructor takes the classpath plugins as classes. */
final class VersionedNode extends Node {

    static final List<Class<? extends Plugin>> PLUGINS = Arrays.asList(
        Netty4Plugin.class, PainlessPlugin.class, MustachePlugin.class,
        CommonAnalysisPlugin.class, MapperExtrasPlugin.class, ReindexPlugin.class);

    VersionedNode(Environment environment) {
        super(environment, PLUGINS, true);
    }
}
