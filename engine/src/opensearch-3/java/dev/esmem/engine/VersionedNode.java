package dev.esmem.engine;

import java.util.Collections;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import org.opensearch.Version;
import org.opensearch.analysis.common.CommonAnalysisModulePlugin;
import org.opensearch.env.Environment;
import org.opensearch.index.mapper.MapperExtrasModulePlugin;
import org.opensearch.index.reindex.ReindexModulePlugin;
import org.opensearch.node.Node;
import org.opensearch.painless.PainlessModulePlugin;
import org.opensearch.plugins.Plugin;
import org.opensearch.plugins.PluginInfo;
import org.opensearch.script.mustache.MustacheModulePlugin;
import org.opensearch.transport.Netty4ModulePlugin;

/**
 * OpenSearch 3.x: the modules' plugin classes were renamed (*ModulePlugin) and Node's protected
 * constructor takes PluginInfo descriptors instead of classes (as the 3.x test framework's MockNode builds them).
 */
final class VersionedNode extends Node {

    static final List<Class<? extends Plugin>> PLUGINS = List.of(
        Netty4ModulePlugin.class, PainlessModulePlugin.class, MustacheModulePlugin.class,
        CommonAnalysisModulePlugin.class, MapperExtrasModulePlugin.class, ReindexModulePlugin.class);

    VersionedNode(Environment environment) {
        super(environment, Stream.concat(PLUGINS.stream(), EmbeddedNode.extraPlugins().stream())  // + -Desmem.plugins (k-NN)
            .map(p -> new PluginInfo(p.getName(), "classpath plugin", "NA", Version.CURRENT, "21",
                                     p.getName(), null, Collections.emptyList(), false))
            .collect(Collectors.toList()), true);
    }
}
