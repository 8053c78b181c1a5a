#include "convert/convert_responses_internal.h"

namespace tandem::recipe::internal {

// The tool deepseek-recipe declares for the Responses `apply_patch` custom tool: the model was
// trained on this exact description and schema, so both are reproduced verbatim. The V4.1 text
// sets the patch envelope off with a blank line after the introduction.
ToolDefinition ApplyPatchTool(ModelVersion version) {
  static constexpr char kDescription[] = R"APPLY_PATCH(Use the `apply_patch` tool to edit files.
Your patch language is a stripped‑down, file‑oriented diff format designed to be easy to parse and safe to apply. You can think of it as a high‑level envelope:
*** Begin Patch
[ one or more file sections ]
*** End Patch

Within that envelope, you get a sequence of file operations.
You MUST include a header to specify the action you are taking.
Each operation starts with one of three headers:

*** Add File: <path> - create a new file. Every following line is a + line (the initial contents).
*** Delete File: <path> - remove an existing file. Nothing follows.
*** Update File: <path> - patch an existing file in place (optionally with a rename).

May be immediately followed by *** Move to: <new path> if you want to rename the file.
Then one or more “hunks”, each introduced by @@ (optionally followed by a hunk header).
Within a hunk each line starts with:

For instructions on [context_before] and [context_after]:
- By default, show 3 lines of code immediately above and 3 lines immediately below each change. If a change is within 3 lines of a previous change, do NOT duplicate the first change’s [context_after] lines in the second change’s [context_before] lines.
- If 3 lines of context is insufficient to uniquely identify the snippet of code within the file, use the @@ operator to indicate the class or function to which the snippet belongs. For instance, we might have:
@@ class BaseClass
[3 lines of pre-context]
- [old_code]
+ [new_code]
[3 lines of post-context]

- If a code block is repeated so many times in a class or function such that even a single `@@` statement and 3 lines of context cannot uniquely identify the snippet of code, you can use multiple `@@` statements to jump to the right context. For instance:

@@ class BaseClass
@@ 	 def method():
[3 lines of pre-context]
- [old_code]
+ [new_code]
[3 lines of post-context]

The full grammar definition is below:
Patch := Begin { FileOp } End
Begin := "*** Begin Patch" NEWLINE
End := "*** End Patch" NEWLINE
FileOp := AddFile | DeleteFile | UpdateFile
AddFile := "*** Add File: " path NEWLINE { "+" line NEWLINE }
DeleteFile := "*** Delete File: " path NEWLINE
UpdateFile := "*** Update File: " path NEWLINE [ MoveTo ] { Hunk }
MoveTo := "*** Move to: " newPath NEWLINE
Hunk := "@@" [ header ] NEWLINE { HunkLine } [ "*** End of File" NEWLINE ]
HunkLine := (" " | "-" | "+") text NEWLINE

A full patch can combine several operations:

*** Begin Patch
*** Add File: hello.txt
+Hello world
*** Update File: src/app.py
*** Move to: src/main.py
@@ def greet():
-print("Hi")
+print("Hello, world!")
*** Delete File: obsolete.txt
*** End Patch

It is important to remember:

- You must include a header with your intended action (Add/Delete/Update)
- You must prefix new lines with `+` even when creating a new file
- File references can only be relative, NEVER ABSOLUTE.
)APPLY_PATCH";
  static constexpr char kParameters[] =
      R"APPLY_PATCH({"type": "object", "additionalProperties": false, "properties": {"input": {"type": "string", "description": "The entire contents of the apply_patch command (the *** Begin Patch ... *** End Patch envelope)."}}, "required": ["input"]})APPLY_PATCH";
  ToolDefinition tool;
  tool.name = "apply_patch";
  std::string description = kDescription;
  if (version == ModelVersion::kDeepseekV41) {
    const std::size_t second_line_end = description.find('\n', description.find('\n') + 1);
    description.insert(second_line_end, "\n");
  }
  tool.description = std::move(description);
  tool.parameters = Json::parse(kParameters);
  return tool;
}

}  // namespace tandem::recipe::internal
