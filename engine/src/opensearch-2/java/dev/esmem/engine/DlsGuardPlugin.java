package dev.esmem.engine;

import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.function.Supplier;

import org.apache.lucene.util.SetOnce;
import org.opensearch.OpenSearchSecurityException;
import org.opensearch.action.ActionRequest;
import org.opensearch.action.DocWriteRequest;
import org.opensearch.action.bulk.BulkRequest;
import org.opensearch.action.search.SearchRequest;
import org.opensearch.action.support.ActionFilter;
import org.opensearch.action.support.ActionFilterChain;
import org.opensearch.client.Client;
import org.opensearch.cluster.metadata.IndexNameExpressionResolver;
import org.opensearch.cluster.service.ClusterService;
import org.opensearch.common.util.concurrent.ThreadContext;
import org.opensearch.core.action.ActionListener;
import org.opensearch.core.action.ActionResponse;
import org.opensearch.core.common.io.stream.NamedWriteableRegistry;
import org.opensearch.core.rest.RestStatus;
import org.opensearch.core.xcontent.NamedXContentRegistry;
import org.opensearch.env.Environment;
import org.opensearch.env.NodeEnvironment;
import org.opensearch.plugins.ActionPlugin;
import org.opensearch.plugins.Plugin;
import org.opensearch.repositories.RepositoriesService;
import org.opensearch.script.ScriptService;
import org.opensearch.search.aggregations.AggregationBuilder;
import org.opensearch.search.aggregations.bucket.terms.TermsAggregationBuilder;
import org.opensearch.search.builder.SearchSourceBuilder;
import org.opensearch.tasks.Task;
import org.opensearch.threadpool.ThreadPool;
import org.opensearch.watcher.ResourceWatcherService;

/**
 * The secured embedded engine's guard for what document-level security does not cover.
 *
 * The security plugin (2.19) applies a role's DLS query to the search query of a search request
 * (and at the Lucene reader only for gets and suggesters). Whatever in a search ignores the query
 * therefore sees every document of the index: a `global` aggregation (its top_hits return the hidden
 * documents), the background set of significant_terms/significant_text (counts of hidden documents),
 * a terms aggregation with min_doc_count 0 below the top level (keys of hidden documents), and a
 * suggester (the terms dictionary of the whole index). The same holds for any aggregation that
 * reports buckets without documents (multi_terms, composite with missing buckets, histograms with
 * min_doc_count 0, ...). This action filter runs after the security filter and, when the security
 * plugin has put a DLS restriction on the request (its thread-context headers), lets through only the
 * aggregations esmem's templates use (ALLOWED, at any depth, terms never with min_doc_count 0) and no
 * suggester: anything else gets 403 and one line saying what was refused. Users without DLS (the
 * admin) are not affected.
 *
 * DLS is also a read-only control: a DLS user with the index permission can overwrite (index by id)
 * a document it cannot see. Under DLS this filter lets a client's own write requests only create
 * new documents (op_type create fails on an existing id, visible or not) and refuses index-by-id
 * overwrites and deletes; writes that _update_by_query makes for its own DLS-filtered search (child
 * tasks) pass, so scripted updates of visible documents keep working. What it cannot check is the
 * content of a new document: a DLS user can still create documents that its DLS query does not match.
 */
public final class DlsGuardPlugin extends Plugin implements ActionPlugin {

    /** Thread-context headers the security plugin sets when a DLS restriction applies to a request. */
    static final List<String> DLS_HEADERS = List.of(
        "_opendistro_security_dls_query", "_opendistro_security_dls_filter_level_query",
        "_opendistro_security_filter_level_dls_done");

    /** The aggregation types esmem's stored templates use (templates/search): an allow-list, not a deny-list. */
    static final Set<String> ALLOWED = Set.of("terms", "filter", "range", "sum", "cardinality", "top_hits");

    private final SetOnce<ThreadContext> threadContext = new SetOnce<>();

    @Override
    public Collection<Object> createComponents(Client client, ClusterService clusterService, ThreadPool threadPool,
                                               ResourceWatcherService resourceWatcherService, ScriptService scriptService,
                                               NamedXContentRegistry xContentRegistry, Environment environment,
                                               NodeEnvironment nodeEnvironment, NamedWriteableRegistry namedWriteableRegistry,
                                               IndexNameExpressionResolver indexNameExpressionResolver,
                                               Supplier<RepositoriesService> repositoriesServiceSupplier) {
        threadContext.set(threadPool.getThreadContext());
        return Collections.emptyList();
    }

    @Override
    public List<ActionFilter> getActionFilters() {
        return List.of(new Guard());
    }

    /** What in `source` would see documents the DLS query hides; null when nothing. */
    static String unguarded(SearchSourceBuilder source) {
        if (source == null) {
            return null;
        }
        if (source.suggest() != null) {
            return "a suggester";
        }
        return source.aggregations() == null ? null : unguarded(source.aggregations().getAggregatorFactories());
    }

    private static String unguarded(Collection<AggregationBuilder> aggs) {
        for (AggregationBuilder agg : aggs) {
            String type = agg.getType();
            if (!ALLOWED.contains(type)) {
                return "a " + type + " aggregation";
            }
            if (agg instanceof TermsAggregationBuilder && ((TermsAggregationBuilder) agg).minDocCount() == 0) {
                return "a terms aggregation with min_doc_count 0";
            }
            String inner = unguarded(agg.getSubAggregations());
            if (inner != null) {
                return inner;
            }
        }
        return null;
    }

    /** A write in `request` that could change a document the DLS query hides; null when none. */
    static String overwrite(ActionRequest request) {
        List<? extends DocWriteRequest<?>> writes;
        if (request instanceof BulkRequest) {
            writes = ((BulkRequest) request).requests();
        } else if (request instanceof DocWriteRequest) {
            writes = List.of((DocWriteRequest<?>) request);
        } else {
            return null;
        }
        for (DocWriteRequest<?> write : writes) {
            if (write.opType() != DocWriteRequest.OpType.CREATE && write.opType() != DocWriteRequest.OpType.UPDATE) {
                return "op_type " + write.opType().getLowercase() + " (id " + write.id() + ")";
            }
        }
        return null;  // updates are refused under DLS by the security plugin itself
    }

    private final class Guard implements ActionFilter {

        @Override
        public int order() {
            return 0;  // after the security plugin's filter (Integer.MIN_VALUE), which sets the DLS headers
        }

        @Override
        public <Request extends ActionRequest, Response extends ActionResponse> void apply(
                Task task, String action, Request request, ActionListener<Response> listener,
                ActionFilterChain<Request, Response> chain) {
            if (!task.getParentTaskId().isSet() && underDls()) {  // a client's own request (no parent task)
                String refused = overwrite(request);
                if (refused != null) {
                    listener.onFailure(new OpenSearchSecurityException(
                        refused + " is not allowed under document-level security (only creating new documents is)",
                        RestStatus.FORBIDDEN));
                    return;
                }
            }
            if (request instanceof SearchRequest && underDls()) {
                String what = unguarded(((SearchRequest) request).source());
                if (what != null) {
                    listener.onFailure(new OpenSearchSecurityException(
                        what + " is not allowed under document-level security (it would ignore the DLS query)",
                        RestStatus.FORBIDDEN));
                    return;
                }
            }
            chain.proceed(task, action, request, listener);
        }

        private boolean underDls() {
            ThreadContext ctx = threadContext.get();
            if (ctx == null) {
                return false;
            }
            for (String header : DLS_HEADERS) {
                if (ctx.getHeader(header) != null) {
                    return true;
                }
            }
            return false;
        }
    }
}
