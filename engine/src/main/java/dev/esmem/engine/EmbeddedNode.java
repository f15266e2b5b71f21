package dev.esmem.engine;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.CountDownLatch;

import org.opensearch.analysis.common.CommonAnalysisPlugin;
import org.opensearch.common.settings.Settings;
import org.opensearch.index.mapper.MapperExtrasPlugin;
import org.opensearch.index.reindex.ReindexPlugin;
import org.opensearch.node.InternalSettingsPreparer;
import org.opensearch.node.Node;
import org.opensearch.painless.PainlessPlugin;
import org.opensearch.plugins.Plugin;
import org.opensearch.script.mustache.MustachePlugin;
import org.opensearch.transport.Netty4Plugin;

/**
 * Starts one OpenSearch node in this JVM with the modules esmem needs.
 *
 * Node's constructor that takes classpath plugins is protected, hence the subclass.
 * Usage: EmbeddedNode HOME_DIR HTTP_PORT   (port 0 = let the OS pick; the bound
 * address is written to HOME_DIR/http.address once the node answers).
 * -Desmem.plugins=CLASS[,CLASS...] adds plugins found on the classpath (the secured engine passes
 * org.opensearch.security.OpenSearchSecurityPlugin); their settings come from HOME_DIR/config/opensearch.yml.
 */
public final class EmbeddedNode extends Node {

    static final List<Class<? extends Plugin>> PLUGINS = Arrays.asList(
        Netty4Plugin.class, PainlessPlugin.class, MustachePlugin.class,
        CommonAnalysisPlugin.class, MapperExtrasPlugin.class, ReindexPlugin.class);

    EmbeddedNode(Settings settings, Collection<Class<? extends Plugin>> plugins) {
        super(InternalSettingsPreparer.prepareEnvironment(settings, java.util.Collections.emptyMap(), null, () -> "esmem-embedded"),
              plugins, true);
    }

    @SuppressWarnings("unchecked")
    static List<Class<? extends Plugin>> extraPlugins() throws ClassNotFoundException {
        List<Class<? extends Plugin>> extra = new java.util.ArrayList<>();
        for (String name : System.getProperty("esmem.plugins", "").split(",")) {
            if (!name.isBlank()) {
                extra.add((Class<? extends Plugin>) Class.forName(name.trim()));
            }
        }
        return extra;
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: EmbeddedNode HOME_DIR HTTP_PORT");
            System.exit(2);
        }
        Path home = Path.of(args[0]).toAbsolutePath();
        Files.createDirectories(home.resolve("data"));
        Files.createDirectories(home.resolve("logs"));
        Files.createDirectories(home.resolve("config"));
        String port = args[1].equals("0") ? "0" : args[1];
        List<Class<? extends Plugin>> extra = extraPlugins();
        Settings.Builder builder = Settings.builder()
            .put("path.home", home.toString())
            .put("path.data", home.resolve("data").toString())
            .put("path.logs", home.resolve("logs").toString())
            .put("cluster.name", "esmem-embedded")
            .put("node.name", "esmem-embedded")
            .put("network.host", "127.0.0.1")
            .put("http.port", port)
            .put("transport.port", "0")
            .put("discovery.type", "single-node")
            .put("cluster.routing.allocation.disk.threshold_enabled", false)
            .put("action.auto_create_index", true);
        if (extra.isEmpty()) {
            // With extra plugins (security) their own HTTP/transport types (TLS) must win, so none is forced.
            builder.put("http.type", "netty4").put("transport.type", "netty4");
        }
        Settings settings = builder.build();
        List<Class<? extends Plugin>> plugins = new java.util.ArrayList<>(PLUGINS);
        plugins.addAll(extra);
        EmbeddedNode node = new EmbeddedNode(settings, plugins);
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                node.close();
            } catch (Exception e) {
                e.printStackTrace();
            } finally {
                stopped.countDown();
            }
        }));
        node.start();
        String address = node.injector().getInstance(org.opensearch.http.HttpServerTransport.class)
            .boundAddress().publishAddress().toString();
        Path tmp = home.resolve("http.address.tmp");
        Files.writeString(tmp, address);
        Files.move(tmp, home.resolve("http.address"), java.nio.file.StandardCopyOption.ATOMIC_MOVE,
                   java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        System.out.println("esmem-embedded http " + address);
        stopped.await();
    }
}
