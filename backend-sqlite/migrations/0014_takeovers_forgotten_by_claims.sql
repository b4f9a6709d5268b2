-- A claim sent again after a lost reply reuses its tokens: when it leases
-- an item under the token a reap took from an earlier lease of that item,
-- the earlier lease's takeover trace would speak of the new lease to
-- lease_fate (an ack that landed reported lost). Leasing an item under a
-- token drops any takeover trace of that (item, token), in the claim's own
-- statement.
CREATE TRIGGER leaseq_takeovers_forgotten_by_claims
AFTER UPDATE OF token ON leaseq_items
WHEN NEW.state = 'leased' AND NEW.token IS NOT NULL
BEGIN
    DELETE FROM leaseq_takeovers WHERE id = NEW.id AND token = NEW.token;
END;
