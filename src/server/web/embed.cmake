# Embeds index.html into a generated translation unit; re-run when it changes.
file(READ ${CMAKE_CURRENT_LIST_DIR}/index.html INGOT_CHAT_PAGE)
configure_file(${CMAKE_CURRENT_LIST_DIR}/web_page.cpp.in ${CMAKE_CURRENT_BINARY_DIR}/web_page.cpp @ONLY)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/index.html)
