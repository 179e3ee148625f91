package api_test

import (
	"os"
	"sync"
	"testing"

	"github.com/envelopd/envelopd/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// pgTests are the tests that run again with the store on Postgres:
// the whole API over the other backend, through the same
// store.DB (TestPostgresAPI). A new API test is added here too.
var pgTests = []struct {
	name string
	fn   func(*testing.T)
}{
	{"Auth", TestAuth},
	{"ScopedKey", TestScopedKey},
	{"Paging", TestPaging},
	{"Validation", TestValidation},
	{"SendAndReply", TestSendAndReply},
	{"ThreadsUpdateDelete", TestThreadsUpdateDelete},
	{"RelayLocal", TestRelayLocal},
	{"WebsocketAuth", TestWebsocketAuth},
	{"WebsocketEvents", TestWebsocketEvents},
	{"WebsocketSendEvents", TestWebsocketSendEvents},
	{"IdempotencyKey", TestIdempotencyKey},
	{"WebhookCRUD", TestWebhookCRUD},
	{"WebhookDelivery", TestWebhookDelivery},
	{"WebhookNoLinkLocal", TestWebhookNoLinkLocal},
	{"ListFilters", TestListFilters},
	{"StrangersDoNotSlowValidKeys", TestStrangersDoNotSlowValidKeys},
	{"ConcurrentGuessesCounted", TestConcurrentGuessesCounted},
	{"NoExistenceLeakThroughClientID", TestNoExistenceLeakThroughClientID},
	{"StructuralHeadersRefused", TestStructuralHeadersRefused},
	{"RevokedKeyWebhooks", TestRevokedKeyWebhooks},
	{"WebhookLimits", TestWebhookLimits},
	{"WebhookIsolation", TestWebhookIsolation},
	{"WebhookGiveUp", TestWebhookGiveUp},
	{"RevokedKeyDownloadURL", TestRevokedKeyDownloadURL},
	{"RevokedKeyClosesWebsocket", TestRevokedKeyClosesWebsocket},
	{"Domains", TestDomainsAPI},
	{"WebsocketVariantEvents", TestWebsocketVariantEvents},
	{"InboxEvents", TestInboxEvents},
	{"DraftAttachments", TestDraftAttachments},
	{"BatchMessages", TestBatchMessages},
	{"PodWebhooks", TestPodWebhooks},
	{"APIKeysOverAPI", TestAPIKeysOverAPI},
	{"PermissionsEnforced", TestPermissionsEnforced},
	{"APIKeyScopeAndPermissions", TestAPIKeyScopeAndPermissions},
	{"AuthMe", TestAuthMe},
	{"WebsocketPermissions", TestWebsocketPermissions},
	{"Usage", TestUsage},
	{"WebhookHeaders", TestWebhookHeaders},
	{"WebhookHeadersDelivered", TestWebhookHeadersDelivered},
	{"Metrics", TestMetrics},
	{"PodDomains", TestPodDomains},
}

// postgresTests marks the tests (by their *testing.T) whose newEnv opens
// Postgres.
var postgresTests sync.Map

func onPostgres(t testing.TB) bool {
	_, ok := postgresTests.Load(t)
	return ok
}

// TestPostgresAPI runs the API tests with the store on Postgres (a
// schema of their own each). It skips without Postgres and fails under
// ENVELOPD_INTEROP=1 when none can be started.
func TestPostgresAPI(t *testing.T) {
	pgtest.Server(t)
	for _, tc := range pgTests {
		t.Run(tc.name, func(t *testing.T) {
			postgresTests.Store(t, true)
			t.Cleanup(func() { postgresTests.Delete(t) })
			tc.fn(t)
		})
	}
}
