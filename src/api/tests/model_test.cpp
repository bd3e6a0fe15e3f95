#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "ingot/model.h"
#include "util/error.h"

namespace {

// The message of what load_model throws, and its kind.
std::pair<ingot::ErrorKind, std::string> load_error(const std::string& model, const ingot::ModelOptions& o) {
  try {
    ingot::load_model(model, o);
  } catch (const ingot::Error& e) {
    return {e.kind(), e.what()};
  }
  ADD_FAILURE() << "load_model(" << model << ") did not throw";
  return {ingot::ErrorKind::Internal, ""};
}

std::string golden(const char* name) { return (std::filesystem::path(INGOT_SHARED_DIR) / "goldens" / name).string(); }

}  // namespace

TEST(LoadModel, BadOptionsAreClearErrorsBeforeAnythingLoads) {
  const std::string dir = golden("llama-float32");
  ingot::ModelOptions o;
  o.device = "gpu";
  auto [kind, msg] = load_error(dir, o);
  EXPECT_EQ(kind, ingot::ErrorKind::InvalidArgument);
  EXPECT_NE(msg.find("ModelOptions::device 'gpu'"), std::string::npos) << msg;
  o = {};
  o.kv = "kv3";
  std::tie(kind, msg) = load_error(dir, o);
  EXPECT_NE(msg.find("ModelOptions::kv 'kv3' is not one of paged, kv8, kv4, contiguous"), std::string::npos) << msg;
  o = {};
  o.speculative = "draft";  // a draft model is a CLI / server flag, not an embedding option yet
  std::tie(kind, msg) = load_error(dir, o);
  EXPECT_NE(msg.find("ModelOptions::speculative"), std::string::npos) << msg;
  o = {};
  o.threads = -1;
  std::tie(kind, msg) = load_error(dir, o);
  EXPECT_NE(msg.find("threads"), std::string::npos) << msg;
  std::tie(kind, msg) = load_error("", {});
  EXPECT_EQ(kind, ingot::ErrorKind::InvalidArgument);
}

TEST(LoadModel, MissingModelsAndTokenizersAreNamed) {
  auto [kind, msg] = load_error("/nonexistent/model-folder", {});
  EXPECT_NE(msg.find("/nonexistent/model-folder"), std::string::npos) << msg;
  // The golden folders hold weights and config only: text in and out needs a tokenizer.
  std::tie(kind, msg) = load_error(golden("llama-float32"), {});
  EXPECT_NE(msg.find("tokenizer.json"), std::string::npos) << msg;
}
