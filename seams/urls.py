from django.urls import path

from seams import views

urlpatterns = [
    path("seams/v1/sale", views.sale_webhook, name="seam-sale"),
    path(
        "api/v1/catalog/linked-products",
        views.catalog_linked_products,
        name="catalog-linked-products",
    ),
    path("api/v1/catalog/booths", views.catalog_booths, name="catalog-booths"),
]
