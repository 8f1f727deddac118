package members

// Handler is handler, for the tests of package members_test (which may
// import what imports members, such as importer/vip).
var Handler = handler
