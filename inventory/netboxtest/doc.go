// Package netboxtest is an in-process NetBox 4.3 for tests: an httptest
// server that implements the part of NetBox's REST API fleet uses, checked
// against NetBox's own OpenAPI document.
//
// No NetBox can run where fleet's tests run (its Python stack is not
// installable there), so netboxtest emulates the subset fleet's NetBox client
// and plan/apply need:
//
//   - dcim: sites, manufacturers, device types, device roles, devices,
//     interfaces, MAC addresses, cables; ipam: IP addresses; extras: custom
//     fields, journal entries; core: object changes (read only);
//   - token authentication ("Authorization: Token <key>"), with users made
//     by Config.Users or AddUser; a missing or unknown token is answered 403;
//   - filters on the fields fleet filters by, custom-field filters (cf_NAME,
//     cf_NAME__n, __ie, __ic, __empty), and limit/offset pagination with
//     next and previous links (MAX_PAGE_SIZE 1000 and PAGINATE_COUNT 50 by
//     default). As in NetBox, a filter naming a related object that does
//     not exist (?role=nope, ?site=nope, an interface list's
//     ?device_id=999) is answered 400, not with an empty list. A filter
//     netboxtest does not know is answered 400, where NetBox would ignore
//     it, so a client's typo cannot go unnoticed;
//   - bulk create (a list body on POST) and bulk update (a list of objects
//     with IDs on PATCH) of the writable kinds above, each request one transaction
//     as in NetBox: when one object is refused nothing is written. fleet's
//     client sends them for Apply, for journal entries and MAC addresses
//     (bulk create) and for interfaces' primary MACs (bulk update);
//   - NetBox's rules that matter to fleet: a device's name is unique per
//     site, an IP address is unique in the global table
//     (ENFORCE_GLOBAL_UNIQUE), a primary IPv4 must be assigned to one of the
//     device's interfaces, a primary IP cannot be reassigned, an interface
//     takes one cable, a primary MAC must belong to its interface, custom
//     fields are typed and checked against their validation_regex, and a
//     write's custom_fields merge into the object's;
//   - the changelog: every write records an ObjectChange with the token's
//     user, a request ID, and the object's data before and after, as
//     NetBox's change logging does (an update that changes nothing is not
//     recorded, as in NetBox 4).
//
// A field netboxtest does not implement is refused with 400, never
// silently dropped. Lists are ordered by ID (object changes newest first).
//
// # The schema check
//
// With Config.Validate set (a *testing.T will do), every request the server
// receives and every answer it sends is validated with kin-openapi against
// NetBox 4.3's OpenAPI document as go-netbox v4.3.0 ships it
// (api/openapi.yaml), pruned to the paths above and embedded
// (openapi.json; go generate rewrites it, and TestSchemaIsCurrent fails when
// it no longer matches the module). Formats are checked (date-time, uri,
// uuid). A mismatch is reported through Validate.Errorf, so it fails the
// test. The schema is stricter than NetBox in known places (netbox#11805),
// and the check relaxes exactly those: choice fields NetBox answers null
// when empty (device face and airflow; interface mode, rf_role, rf_channel,
// poe_mode, poe_type; IP address role), a null custom-field value, a null
// ObjectChange user (a deleted user), and a blank IP address dns_name and
// cable color. A list body on POST, NetBox's bulk create, which the schema
// does not describe, is checked element by element against the
// single-object schema.
//
// # Faults
//
// Inject makes the server fail like a NetBox in trouble: Down closes each
// connection without an answer, Slow answers late, Failing answers 5xx
// without processing, Cut processes a request and cuts its answer halfway.
// Fault.After lets that many requests through first, to fail a run midway.
// Requests and RequestCount tell how many requests a client made.
//
// # Seeding
//
// AddSwitch creates a switch with its ports (named "Port N" by default, as
// UniFi names them), AddSite a site, AddUser a user with a token.
// EditCustomField acts as another NetBox user editing a device's custom
// field; ForgetChanges drops an object's changelog records, as changelog
// retention does; DeleteUser deletes a user, whose changes then answer user
// null. Seeds are written through the same code as API writes, so they carry
// changelog records too.
//
// # Concurrency
//
// A Server is safe for concurrent use; each request runs under one lock, as
// one transaction. Close it when done.
package netboxtest
