// (HTTP server lands here.)
namespace sluice {}
