package dev.esmem.engine;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;

import org.opensearch.common.settings.Settings;
import org.opensearch.http.HttpServerTransport;
import org.opensearch.node.InternalSettingsPreparer;
import org.opensearch.plugins.NetworkPlugin;
import org.opensearch.plugins.Plugin;

/**
 * Starts one OpenSearch node in this JVM with the modules esmem needs (VersionedNode, one per major).
 *
 * Usage: EmbeddedNode HOME_DIR HTTP_PORT [SETTING=VALUE ...]   (port 0 = let the OS pick; the bound
 * address is written to HOME_DIR/http.address once the node answers). Extra settings override the
 * single-node defaults, e.g. to join several nodes into one cluster.
 * -Desmem.plugins=CLASS[,CLASS...] adds plugins found on the classpath (the secured engine passes
 * org.opensearch.security.OpenSearchSecurityPlugin, every engine the k-NN plugin's
 * org.opensearch.knn.plugin.KNNPlugin); their settings come from HOME_DIR/config/opensearch.yml.
 */
public final class EmbeddedNode {

    /** The classes named by -Desmem.plugins (VersionedNode adds them to the modules). */
    @SuppressWarnings("unchecked")
    static List<Class<? extends Plugin>> extraPlugins() {
        List<Class<? extends Plugin>> extra = new ArrayList<>();
        for (String name : System.getProperty("esmem.plugins", "").split(",")) {
            if (!name.isBlank()) {
                try {
                    extra.add((Class<? extends Plugin>) Class.forName(name.trim()));
                } catch (ClassNotFoundException e) {
                    throw new IllegalArgumentException("plugin class not on the classpath: " + name, e);
                }
            }
        }
        return extra;
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: EmbeddedNode HOME_DIR HTTP_PORT [SETTING=VALUE ...]");
            System.exit(2);
        }
        Path home = Path.of(args[0]).toAbsolutePath();
        Files.createDirectories(home.resolve("data"));
        Files.createDirectories(home.resolve("logs"));
        Files.createDirectories(home.resolve("config"));
        Settings.Builder settings = Settings.builder()
            .put("path.home", home.toString())
            .put("path.data", home.resolve("data").toString())
            .put("path.logs", home.resolve("logs").toString())
            .put("cluster.name", "esmem-embedded")
            .put("node.name", "esmem-embedded")
            .put("network.host", "127.0.0.1")
            .put("http.port", args[1])
            .put("transport.port", "0")
            .put("discovery.type", "single-node")
            .put("cluster.routing.allocation.disk.threshold_enabled", false)
            .put("action.auto_create_index", true);
        if (extraPlugins().stream().noneMatch(NetworkPlugin.class::isAssignableFrom)) {
            // A network plugin (security) brings its own HTTP/transport types (TLS) that must win, so none is forced.
            settings.put("http.type", "netty4").put("transport.type", "netty4");
        }
        for (int i = 2; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq <= 0) {
                System.err.println("not a SETTING=VALUE pair: " + args[i]);
                System.exit(2);
            }
            settings.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        VersionedNode node = new VersionedNode(InternalSettingsPreparer.prepareEnvironment(
            settings.build(), java.util.Collections.emptyMap(), null, () -> "esmem-embedded"));
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
        String address = node.injector().getInstance(HttpServerTransport.class)
            .boundAddress().publishAddress().toString();
        Path tmp = home.resolve("http.address.tmp");
        Files.writeString(tmp, address);
        Files.move(tmp, home.resolve("http.address"), StandardCopyOption.ATOMIC_MOVE,
                   StandardCopyOption.REPLACE_EXISTING);
        System.out.println("esmem-embedded http " + address);
        stopped.await();
    }
}
