#include "tandem/base/mapped_file.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace tandem {
namespace {

TEST(MappedFile, MapsContentsAndReportsMissingFiles) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("tandem_mapped_" + std::to_string(::getpid()) + ".bin");
  {
    std::ofstream out(path, std::ios::binary);
    out << "hello";
  }
  auto mapped = MappedFile::Open(path.string());
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  ASSERT_EQ(mapped->size(), 5u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(mapped->data()), 5), "hello");
  MappedFile moved = std::move(*mapped);
  EXPECT_EQ(moved.size(), 5u);
  std::filesystem::remove(path);

  auto missing = MappedFile::Open("/nonexistent/tandem/file");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tandem
