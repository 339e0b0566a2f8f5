package dialect

// The columns a record's lease lives in when its repository keeps leases in
// the record's own row (repository.WithLeasesInRow), added to the table by
// migrations.AddLeaseColumns: the holder, the SHA-256 of its token in hex
// (NULL when no lease is held), the fence, and the grant and expiry times
// in milliseconds by the database's clock.
const (
	LeaseOwnerCol    = "gormlock_lease_owner"
	LeaseTokenCol    = "gormlock_lease_token"
	LeaseFenceCol    = "gormlock_lease_fence"
	LeaseAcquiredCol = "gormlock_lease_acquired_ms"
	LeaseExpiresCol  = "gormlock_lease_expires_ms"
)

// LeaseColumns returns the lease columns with their SQL types on dialect
// name ("sqlite", "postgres", "mysql"), in the order they are added.
func LeaseColumns(name string) [][2]string {
	text, token := "TEXT", "TEXT"
	if name == MySQL {
		text, token = "VARBINARY(1024)", "VARBINARY(64)"
	}
	return [][2]string{
		{LeaseOwnerCol, text + " NULL"},
		{LeaseTokenCol, token + " NULL"},
		{LeaseFenceCol, "BIGINT NOT NULL DEFAULT 0"},
		{LeaseAcquiredCol, "BIGINT NULL"},
		{LeaseExpiresCol, "BIGINT NULL"},
	}
}
