// multipart/form-data bodies (RFC 7578 over RFC 2046): the boundary from a
// Content-Type header, then the parts. A part's content and content type are
// views into the body (nothing is copied); its name and filename are copies,
// since quoted strings may carry escapes. Every malformed input is an
// Error(InvalidArgument) whose message says what is wrong and where.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ingot::server {

struct MultipartLimits {
  size_t max_parts = 256;
  size_t max_header_bytes = 16 * 1024;  // one part's header block
  size_t max_header_lines = 16;         // per part
};

struct MultipartPart {
  std::string name;               // Content-Disposition name (required)
  std::string filename;           // Content-Disposition filename ("" when absent)
  std::string_view content_type;  // the part's Content-Type value ("" when absent)
  std::string_view content;       // the part's bytes, inside the body
};

// True when the header's media type is multipart/form-data (any case, any parameters).
bool is_multipart_form_data(std::string_view content_type);

// The `boundary` parameter of a multipart Content-Type header (token or
// quoted string). Throws when it is missing, empty, longer than 70 bytes
// (RFC 2046) or holds bytes outside printable ASCII.
std::string multipart_boundary(std::string_view content_type);

// Splits `body` into its parts. The preamble before the first boundary line
// and the epilogue after the closing one are ignored. Throws on: no boundary
// line, a boundary line not followed by a line break or `--`, part headers
// that never end or exceed the limits, a header line without a colon, a part
// without `Content-Disposition: form-data; name=...`, more than
// `max_parts` parts, and a body that ends before the closing boundary.
std::vector<MultipartPart> parse_multipart(std::string_view body, std::string_view boundary,
                                           const MultipartLimits& limits = {});

// The parts of a request, given its Content-Type header: multipart_boundary + parse_multipart.
std::vector<MultipartPart> parse_form_data(std::string_view content_type, std::string_view body,
                                           const MultipartLimits& limits = {});

}  // namespace ingot::server
